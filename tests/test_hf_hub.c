/* Model names in the Hugging Face cache (src/hf/hub.c): a fake cache laid out as huggingface_hub
   lays it out (models--ORG--NAME/refs/main, snapshots/REV/), found through HF_HUB_CACHE, HF_HOME
   and HOME; refs/main before other snapshots; and the error when the name is not there. */
#include "test_util.h"

#include <sys/stat.h>
#include <unistd.h>

static char tmp[256];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A cached repository of the fake cache at hub: snapshots rev (refs/main names it when main)
   holding a tiny WordPiece tokenizer.json whose token "a" has id a_id. */
static void add_snapshot(const char *hub, const char *repo, const char *rev, bool main, int a_id) {
    char p[1024];
    snprintf(p, sizeof p, "mkdir -p %s/%s/refs %s/%s/snapshots/%s", hub, repo, hub, repo, rev);
    assert_int_equal(system(p), 0);
    if (main) {
        snprintf(p, sizeof p, "%s/%s/refs/main", hub, repo);
        write_file(p, rev);
    }
    char json[256];
    snprintf(json, sizeof json, "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":%d}}}",
             a_id);
    snprintf(p, sizeof p, "%s/%s/snapshots/%s/tokenizer.json", hub, repo, rev);
    write_file(p, json);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/nabla_hf_hub_XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    unsetenv("HF_HUB_CACHE");
    unsetenv("XDG_CACHE_HOME");
    nb_error_clear();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* HF_HOME/hub: refs/main's snapshot, not the newer one beside it. */
static void test_refs_main_first(void **state) {
    (void)state;
    char hub[300], want[600], got[1024];
    snprintf(hub, sizeof hub, "%s/home/hub", tmp);
    add_snapshot(hub, "models--tiny-org--tok", "1111aaaa", true, 1);
    sleep(1); /* the other snapshot is newer */
    add_snapshot(hub, "models--tiny-org--tok", "2222bbbb", false, 2);
    snprintf(got, sizeof got, "%s/home", tmp);
    setenv("HF_HOME", got, 1);
    assert_int_equal(nb_hf_resolve("tiny-org/tok", got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/models--tiny-org--tok/snapshots/1111aaaa", hub);
    assert_string_equal(got, want);
    SKIP_WITHOUT_JSON();
    nb_tokenizer *t = nb_tokenizer_load("tiny-org/tok");
    if (!t) fail_msg("%s", nb_error());
    assert_int_equal(nb_token_to_id(t, "a"), 1);
    nb_tokenizer_free(t);
}

/* Without refs/main the newest snapshot; HF_HUB_CACHE before HF_HOME; a name without ORG. */
static void test_hub_cache_and_newest(void **state) {
    (void)state;
    char hub[300], other[300], want[600], got[1024];
    snprintf(hub, sizeof hub, "%s/cache", tmp);
    snprintf(other, sizeof other, "%s/home", tmp);
    add_snapshot(hub, "models--tok", "0001", false, 3);
    sleep(1);
    add_snapshot(hub, "models--tok", "0002", false, 4);
    add_snapshot(other, "hub/models--tok", "9999", true, 5); /* HF_HOME's: not looked at */
    setenv("HF_HOME", other, 1);
    setenv("HF_HUB_CACHE", hub, 1);
    assert_int_equal(nb_hf_resolve("tok", got, sizeof got), 0);
    snprintf(want, sizeof want, "%s/models--tok/snapshots/0002", hub);
    assert_string_equal(got, want);
    unsetenv("HF_HUB_CACHE");
    /* HOME's ~/.cache/huggingface/hub when neither is set */
    unsetenv("HF_HOME");
    char home[300];
    snprintf(home, sizeof home, "%s/user", tmp);
    add_snapshot(home, ".cache/huggingface/hub/models--org--tok", "abcd", true, 6);
    const char *saved = getenv("HOME");
    char *old_home = saved ? strdup(saved) : NULL;
    setenv("HOME", home, 1);
    int rc = nb_hf_resolve("org/tok", got, sizeof got);
    if (old_home) setenv("HOME", old_home, 1);
    free(old_home);
    assert_int_equal(rc, 0);
    snprintf(want, sizeof want, "%s/.cache/huggingface/hub/models--org--tok/snapshots/abcd", home);
    assert_string_equal(got, want);
}

/* A folder that is there is itself, a path is left to the loader, and a name not cached fails
   saying where nabla looked and that it does not download. */
static void test_folders_paths_and_missing(void **state) {
    (void)state;
    char got[1024], dir[300];
    snprintf(dir, sizeof dir, "%s/home", tmp);
    assert_int_equal(mkdir(dir, 0777), 0);
    setenv("HF_HOME", dir, 1);
    assert_int_equal(nb_hf_resolve(dir, got, sizeof got), 0);
    assert_string_equal(got, dir);
    assert_int_equal(nb_hf_resolve("./not/here", got, sizeof got), 0);
    assert_string_equal(got, "./not/here");
    assert_int_equal(nb_hf_resolve("../x", got, sizeof got), 0);
    assert_string_equal(got, "../x");
    char looked[600];
    snprintf(looked, sizeof looked, "%s/hub/models--nobody--gpt9/snapshots", dir);
    assert_true(nb_hf_resolve("nobody/gpt9", got, sizeof got) < 0);
    const char *e = nb_error();
    if (!e || !strstr(e, looked) || !strstr(e, "does not download")) fail_msg("error: %s", e ? e : "(none)");
    nb_error_clear();
    assert_null(nb_hf_load("nobody/gpt9", (nb_hf_opts){ 0 }));
#ifdef NABLA_WITH_JSON
    ASSERT_ERROR_CONTAINS(looked);
#else
    nb_error_clear();
#endif
    char *longname = malloc(3001); /* a Hub-shaped name whose cache path does not fit: said */
    assert_non_null(longname);
    memset(longname, 'a', 3000);
    longname[3000] = 0;
    assert_true(nb_hf_resolve(longname, got, sizeof got) < 0);
    free(longname);
    ASSERT_ERROR_CONTAINS("a model name of 3000 bytes");
    char small[8];
    assert_true(nb_hf_resolve(dir, small, sizeof small) < 0); /* too long for the buffer: said, not cut */
    ASSERT_ERROR_CONTAINS("longer than 7 bytes");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refs_main_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hub_cache_and_newest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_folders_paths_and_missing, setup, teardown),
    };
    return RUN_TESTS(tests);
}
