/* Containers beside layers.c's sequential: Identity, ModuleList (children "0", "1", ... as
   torch's, so state dicts match) and ModuleDict (children under their keys, in insertion order).
   A list or dict has no forward of its own, as in torch: its owner runs the children. */
#include "nn_impl.h"
#include <stdio.h>

static nb_tensor *identity_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb__own(nb_retain(x));
}

/* The forward of ModuleList and ModuleDict: an error naming the container, as torch's
   NotImplementedError. */
static nb_tensor *container_forward(nb_module *m, nb_tensor *x) {
    (void)x;
    nb__error("nb_forward: %s %s has no forward: run its children (nb_module_get_child)", m->cls->name, nb__layer_name(m));
    return NULL;
}

static const nb_module_class IDENTITY = { .name = "Identity", .forward = identity_forward };
static const nb_module_class MODULE_LIST = { .name = "ModuleList", .forward = container_forward };
static const nb_module_class MODULE_DICT = { .name = "ModuleDict", .forward = container_forward };

typedef struct {
    nb_module base;
    int count;
} module_list;

nb_module *nb_nn_identity(void) { return nb_module_new(&IDENTITY, sizeof(nb_module)); }
nb_module *nb_nn_module_list(void) { return nb_module_new(&MODULE_LIST, sizeof(module_list)); }
nb_module *nb_nn_module_dict(void) { return nb_module_new(&MODULE_DICT, sizeof(nb_module)); }

/* Whether m is of class cls; otherwise frees child (the call took it over) and records why. */
static bool is_container(const char *fn, nb_module *m, const nb_module_class *cls, nb_module *child) {
    if (m && m->cls == cls) return true;
    nb_module_free(child);
    if (!nb__has_error()) nb__error("%s: %s is not a %s", fn, m ? m->cls->name : "NULL", cls->name);
    return false;
}

nb_module *nb_nn_module_list_append(nb_module *list, nb_module *child) {
    if (!is_container("nb_nn_module_list_append", list, &MODULE_LIST, child)) return NULL;
    return nb__append_numbered(list, &((module_list *)list)->count, child);
}

int nb_nn_module_list_len(const nb_module *list) {
    if (!list || list->cls != &MODULE_LIST) {
        nb__error("nb_nn_module_list_len: %s is not a ModuleList", list ? list->cls->name : "NULL");
        return -1;
    }
    return ((const module_list *)list)->count;
}

nb_module *nb_nn_module_list_get(nb_module *list, int index) {
    int n = nb_nn_module_list_len(list);
    if (n < 0) return NULL;
    int i = index < 0 ? index + n : index;
    if (i < 0 || i >= n) {
        nb__error("nb_nn_module_list_get: index %d is out of range for %s of %d modules", index, nb__layer_name(list), n);
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "%d", i);
    return nb_module_get_child(list, name);
}

nb_module *nb_nn_module_dict_set(nb_module *dict, const char *key, nb_module *child) {
    if (!is_container("nb_nn_module_dict_set", dict, &MODULE_DICT, child)) return NULL;
    return nb_module_child(dict, key, child) ? dict : NULL;
}
