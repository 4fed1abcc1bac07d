#!/bin/sh
# Runs nabla-plot on the fixture runs that test_summary writes: the SVG is valid XML (xmllint) and
# renders to a PNG (rsvg-convert); the CSV holds every point; a truncated event file is read up to
# its last whole record and the tool says where it stopped; an unwritable output is named.
# Usage: summary_plot.sh NABLA_PLOT FIXTURE_DIR
set -eu
plot=$1
fix=$2
out="$fix/plot_out"
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in xmllint rsvg-convert; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (apt-get install libxml2-utils librsvg2-bin)"
done

"$plot" "$fix/run_a" "$fix/run_b" -o "$out/curves.svg" --smooth 0.6 --csv "$out/scalars.csv" --title "nabla runs" \
    || fail "nabla-plot failed"
xmllint --noout "$out/curves.svg" || fail "the SVG is not valid XML"
rsvg-convert -o "$out/curves.png" "$out/curves.svg" || fail "rsvg-convert could not render the SVG"
[ "$(head -c 8 "$out/curves.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "no PNG came out"
[ "$(stat -c %s "$out/curves.png")" -gt 5000 ] || fail "the PNG is suspiciously small"
grep -q 'loss/train' "$out/curves.svg" || fail "no loss/train panel"
head -1 "$out/scalars.csv" | grep -qx 'run,tag,step,wall_time,value' || fail "bad CSV header"
# run_a: 200 loss, 10 accuracy (second file), 1 negative step, 3 grad norms, 1 lr; run_b: 100 + 10
rows=$(($(wc -l < "$out/scalars.csv") - 1))
[ "$rows" -eq 325 ] || fail "CSV has $rows rows, expected 325"

# a tag filter and the terminal view
"$plot" "$fix/run_b" --tag loss -o "$out/loss.svg" || fail "nabla-plot --tag failed"
xmllint --noout "$out/loss.svg" || fail "the filtered SVG is not valid XML"
grep -q '>accuracy<' "$out/loss.svg" && fail "--tag loss kept the accuracy panel"
"$plot" "$fix/run_b" --text > "$out/text.txt" || fail "nabla-plot --text failed"
grep -q 'loss/train' "$out/text.txt" || fail "--text shows no loss/train"

# a truncated event file: read to the last whole record, the tool says where it stopped
ev=$(ls "$fix"/run_b/events.out.tfevents.* | head -1)
size=$(stat -c %s "$ev")
mkdir -p "$out/cut"
head -c $((size - 7)) "$ev" > "$out/cut/events.out.tfevents.cut"
"$plot" "$out/cut" -o "$out/cut.svg" --csv "$out/cut.csv" 2> "$out/cut.err" || fail "nabla-plot failed on a truncated file"
grep -q 'stopped early.*truncated record at byte' "$out/cut.err" || fail "no note on the truncated file: $(cat "$out/cut.err")"
xmllint --noout "$out/cut.svg" || fail "the SVG of the truncated run is not valid XML"
rows=$(($(wc -l < "$out/cut.csv") - 1))
[ "$rows" -eq 109 ] || fail "truncated run: $rows rows, expected 109"

# an unwritable output and a missing run are errors that name the path
if "$plot" "$fix/run_a" -o /nonexistent/dir/x.svg 2> "$out/err.txt"; then fail "wrote to /nonexistent"; fi
grep -q '/nonexistent/dir/x.svg' "$out/err.txt" || fail "the error does not name the output"
if "$plot" "$fix/no_such_run" -o "$out/x.svg" 2> "$out/err.txt"; then fail "plotted a missing run"; fi
grep -q 'no_such_run' "$out/err.txt" || fail "the error does not name the missing run"
echo "summary_plot: all checks passed"
