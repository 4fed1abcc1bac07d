/* libFuzzer target: `nabla train`'s argument parser on arbitrary argument lists (the input split
   at NUL bytes) must accept or refuse them, never crash, read past argv or overflow a number. */
#include "../tools/train_args.c" /* the parser is the CLI's, not the library's: built in here */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    if (!sink || size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[65] = { "train" };
    int argc = 1;
    for (size_t i = 0; i <= size && argc < 64;) { /* each NUL-terminated piece is one argument */
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    argv[argc] = NULL;
    train_opts o = train_defaults();
    int rc = train_parse_args(argc, argv, &o, sink, sink);
    if (rc == 0 && (o.epochs < 1 || o.batch < 1 || o.workers < 0 || o.threads < 0 || !(o.lr > 0) ||
                    !(o.val_split >= 0 && o.val_split < 1) || o.limit < 0 || o.log_every < 0))
        abort(); /* the parser accepted a value outside its documented range */
    free(text);
    return 0;
}
