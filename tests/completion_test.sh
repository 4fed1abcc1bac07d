#!/usr/bin/env bash
# `nabla completion bash` in bash: `nabla tr<TAB>` completes to train, `nabla train --ep<TAB>` to
# --epochs, `nabla completion <TAB>` offers bash and zsh, a file argument falls back to file names;
# the zsh script parses (when zsh is installed); `nabla manpage` is a page man renders, with every
# subcommand. Usage: completion_test.sh NABLA
set -euo pipefail
nabla="$1"
source <("$nabla" completion bash)
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _nabla; echo "${COMPREPLY[*]}"; }
got="$(complete_words nabla tr)"
[ "$got" = train ] || { echo "nabla tr<TAB> gave '$got', not train"; exit 1; }
got="$(complete_words nabla train --ep)"
[ "$got" = --epochs ] || { echo "nabla train --ep<TAB> gave '$got', not --epochs"; exit 1; }
got="$(complete_words nabla generate --max)"
[ "$got" = --max-new-tokens ] || { echo "nabla generate --max<TAB> gave '$got'"; exit 1; }
got="$(complete_words nabla completion '')"
[ "$got" = "bash zsh" ] || { echo "nabla completion <TAB> gave '$got'"; exit 1; }
got="$(complete_words nabla eval mod)"
[ -z "$got" ] || { echo "a file argument gave '$got' instead of the default completion"; exit 1; }
complete -p nabla | grep -q -- "-F _nabla"
zsh_script="$("$nabla" completion zsh)"
grep -q "^#compdef nabla" <<<"$zsh_script"
grep -q "'train:train a classifier" <<<"$zsh_script"
if command -v zsh >/dev/null; then zsh -n <<<"$zsh_script"; else echo "(zsh not installed: its script's syntax not checked)"; fi
page="$("$nabla" manpage)"
grep -q '^\.TH NABLA 1' <<<"$page"
for cmd in train eval predict generate plot completion; do
    grep -q "^\.SS \"nabla $cmd\"" <<<"$page" || { echo "the man page lacks nabla $cmd"; exit 1; }
done
if command -v man >/dev/null; then
    man -l - <<<"$page" 2>/dev/null | grep -q -- "--epochs" || { echo "man does not render --epochs"; exit 1; }
fi
echo "completion test passed"
