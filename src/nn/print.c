/* The module tree as text (torch's print(model)): each module's class name and settings (its
   class's extra_repr), its children indented beneath it by name. */
#include "nn_impl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CHILDREN = 4096 };

/* torch's layout (Module.__repr__): Name(extra) alone, else Name( then the settings and each
   child on its own line, indented, then ). */
static void repr(nb_text *b, nb_module *m, int indent) {
    char extra[512] = "";
    if (m->cls->extra_repr) m->cls->extra_repr(m, extra, sizeof extra);
    nb__text_printf(b, "%s(", m->cls->name ? m->cls->name : "Module");
    int n = nb__module_children(m, NULL, NULL, 0);
    if (n == 0) {
        nb__text_printf(b, "%s)", extra);
        return;
    }
    const char **names = malloc(sizeof(char *) * (size_t)n);
    nb_module **kids = malloc(sizeof(nb_module *) * (size_t)n);
    if (!names || !kids) {
        b->failed = true;
        free(names);
        free(kids);
        return;
    }
    nb__module_children(m, names, kids, n);
    if (*extra) nb__text_printf(b, "\n%*s%s", indent + 2, "", extra);
    for (int i = 0; i < n; i++) {
        nb__text_printf(b, "\n%*s(%s): ", indent + 2, "", names[i]);
        repr(b, kids[i], indent + 2);
    }
    nb__text_printf(b, "\n%*s)", indent, "");
    free(names);
    free(kids);
}

const char *nb__py_float(double v, char *buf, size_t size) {
    if (!buf || size < 2) return "";
    for (int prec = 1; prec <= 17; prec++) { /* the shortest text that reads back as v, as Python's repr */
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eEn")) { /* a whole number: Python writes 1.0 */
        size_t n = strlen(buf);
        if (n + 3 <= size) memcpy(buf + n, ".0", 3);
    }
    return buf;
}

char *nb_module_repr(nb_module *m) {
    if (!m) {
        if (!nb__has_error()) nb__error("nb_module_repr: module is NULL");
        return NULL;
    }
    nb_text b = { 0 };
    repr(&b, m, 0);
    if (b.failed || !b.s) {
        free(b.s);
        nb__error("nb_module_repr: out of memory");
        return NULL;
    }
    return b.s;
}

int nb_module_print(nb_module *m) {
    char *s = nb_module_repr(m);
    if (!s) return -1;
    int rc = printf("%s\n", s) < 0 ? -1 : 0;
    free(s);
    if (rc < 0) nb__error("nb_module_print: writing to standard output failed");
    return rc;
}
