/* ONNX import: the loader (protobuf-c unpacking, initializers and external data, the checks
   that run before anything else: operators and attributes at the model's opset, acyclic
   graph, names, shapes) and the interpreter that runs the graph on nabla's ops, eagerly or
   under nb_compile. The operators themselves are in import_ops.c and import_conv.c. */
#include "import_impl.h"
#include "../summary/pb.h" /* nb__pb_next: the wire-format reader the nesting walk uses */

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const char *s) { return s ? s : ""; }

/* "nb_onnx: Op node 'name' (#i)" (or without the name) into buf: the words an error of node n
   begins with. */
static void node_label(const onnx_node *n, char *buf, size_t size) {
    const char *name = str(n->pb->name);
    const char *op = *str(n->pb->op_type) ? n->pb->op_type : "(no operator)";
    if (*name) snprintf(buf, size, "nb_onnx: %s node '%s' (#%d)", op, name, n->index);
    else snprintf(buf, size, "nb_onnx: %s node #%d", op, n->index);
}

void nb__onnx_node_error(const onnx_node *n, const char *fmt, ...) {
    char msg[700], label[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    node_label(n, label, sizeof label);
    nb__error("%s: %s", label, msg);
}

/* ---------- attributes ---------- */
const Onnx__AttributeProto *nb__onnx_attr(const onnx_node *n, const char *name) {
    for (size_t k = 0; k < n->pb->n_attribute; k++)
        if (!strcmp(str(n->pb->attribute[k]->name), name)) return n->pb->attribute[k];
    return NULL;
}

int64_t nb__onnx_attr_i(const onnx_node *n, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = nb__onnx_attr(n, name);
    return a ? a->i : def;
}

double nb__onnx_attr_f(const onnx_node *n, const char *name, double def) {
    const Onnx__AttributeProto *a = nb__onnx_attr(n, name);
    return a ? a->f : def;
}

const char *nb__onnx_attr_s(const onnx_node *n, const char *name, const char *def, char *buf, size_t size) {
    const Onnx__AttributeProto *a = nb__onnx_attr(n, name);
    if (!a) return def;
    size_t len = a->s.len < size - 1 ? a->s.len : size - 1;
    if (len) memcpy(buf, a->s.data, len);
    buf[len] = 0;
    return buf;
}

int nb__onnx_attr_ints(const onnx_node *n, const char *name, const int64_t **v) {
    const Onnx__AttributeProto *a = nb__onnx_attr(n, name);
    if (!a) return -1;
    *v = a->ints;
    return (int)(a->n_ints > INT_MAX ? INT_MAX : a->n_ints);
}

/* ---------- tensors ---------- */
/* Whether a relative location stays inside its folder: not absolute, no ".." component. */
static bool location_ok(const char *loc) {
    if (!*loc || loc[0] == '/' || loc[0] == '\\') return false;
    for (const char *p = loc; *p;) {
        const char *e = p;
        while (*e && *e != '/' && *e != '\\') e++;
        if (e - p == 2 && p[0] == '.' && p[1] == '.') return false;
        p = *e ? e + 1 : e;
    }
    return true;
}

/* Parses a decimal uint64 of an external-data entry; false when it is not one. */
static bool parse_u64(const char *s, uint64_t *v) {
    if (!*s) return false;
    uint64_t x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10) return false;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return true;
}

nb_tensor *nb__onnx_tensor(const Onnx__TensorProto *tp, const char *dir, const char *what) {
    nb_dtype dt;
    if (!nb__onnx_to_dtype(tp->data_type, &dt)) {
        nb__error("nb_onnx: %s: ONNX data type %d is not one nabla has (f32, f64, f16, bf16, i64, i32, u8, bool)",
                  what, (int)tp->data_type);
        return NULL;
    }
    if (tp->n_dims > NB_MAX_DIMS) {
        nb__error("nb_onnx: %s has %zu dimensions; nabla allows at most %d", what, tp->n_dims, NB_MAX_DIMS);
        return NULL;
    }
    nb_shape shape = { (int)tp->n_dims, { 0 } };
    int64_t numel = 1;
    for (size_t k = 0; k < tp->n_dims; k++) {
        int64_t d = tp->dims[k];
        if (d < 0 || (d && numel > INT64_MAX / 8 / d)) {
            nb__error("nb_onnx: %s has an invalid dimension %lld", what, (long long)d);
            return NULL;
        }
        shape.dim[k] = d;
        numel *= d;
    }
    size_t esize = nb_dtype_size(dt);
    uint64_t need = (uint64_t)numel * esize;
    nb_tensor *t = NULL;
    if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        const char *loc = NULL;
        uint64_t off = 0, len = UINT64_MAX;
        for (size_t k = 0; k < tp->n_external_data; k++) {
            const char *key = str(tp->external_data[k]->key), *val = str(tp->external_data[k]->value);
            if (!strcmp(key, "location")) loc = val;
            else if (!strcmp(key, "offset") && !parse_u64(val, &off)) {
                nb__error("nb_onnx: %s: external data offset '%s' is not a number", what, val);
                return NULL;
            } else if (!strcmp(key, "length") && !parse_u64(val, &len)) {
                nb__error("nb_onnx: %s: external data length '%s' is not a number", what, val);
                return NULL;
            }
        }
        if (!loc) { nb__error("nb_onnx: %s: external data without a location", what); return NULL; }
        if (!location_ok(loc)) {
            nb__error("nb_onnx: %s: external data location '%s' leaves the model's folder (absolute or '..')", what, loc);
            return NULL;
        }
        if (!dir) {
            nb__error("nb_onnx: %s: external data '%s' in a model loaded from memory", what, loc);
            return NULL;
        }
        if (len == UINT64_MAX) len = need;
        if (len != need) {
            nb__error("nb_onnx: %s: external data has %llu bytes, its shape needs %llu", what, (unsigned long long)len,
                      (unsigned long long)need);
            return NULL;
        }
        size_t pl = strlen(dir) + strlen(loc) + 2;
        char *path = malloc(pl);
        if (!path) { nb__error("nb_onnx: out of memory"); return NULL; }
        snprintf(path, pl, "%s/%s", dir, loc);
        /* A symbolic link leaves the folder as surely as ".." does (onnx's loader refuses it too):
           the file's real path must lie under the folder's, and the real path is what is opened.
           A file that does not resolve is left for the open to report. */
        char *real = realpath(path, NULL), *rdir = real ? realpath(dir, NULL) : NULL;
        if (real && rdir) {
            size_t dl = strlen(rdir);
            bool inside = !strcmp(rdir, "/") || (!strncmp(real, rdir, dl) && real[dl] == '/');
            if (!inside) {
                nb__error("nb_onnx: %s: external data location '%s' leaves the model's folder through a symbolic "
                          "link (it is %s)", what, loc, real);
                free(real), free(rdir), free(path);
                return NULL;
            }
            free(path);
            path = real;
            real = NULL;
        }
        free(real);
        free(rdir);
        nb__map map;
        if (nb__map_open(&map, "nb_onnx_load", path) < 0) { free(path); return NULL; }
        if (off > map.size || map.size - off < len)
            nb__error("nb_onnx: %s: external data [%llu, +%llu) lies past the end of %s (%zu bytes)", what,
                      (unsigned long long)off, (unsigned long long)len, path, map.size);
        else t = nb_keep(nb_from_data(map.data + off, shape, dt));
        nb__map_close(&map);
        free(path);
        return t;
    }
    if (tp->has_raw_data) {
        if (tp->raw_data.len != need) {
            nb__error("nb_onnx: %s: %zu bytes of data, its shape [%d dims, %lld elements] of %s needs %llu", what,
                      tp->raw_data.len, shape.ndim, (long long)numel, nb_dtype_name(dt), (unsigned long long)need);
            return NULL;
        }
        return nb_keep(nb_from_data(tp->raw_data.data, shape, dt));
    }
    /* the typed fields: which one holds which type is fixed by onnx.proto */
    size_t have;
    switch (dt) {
    case NB_F32: have = tp->n_float_data; break;
    case NB_F64: have = tp->n_double_data; break;
    case NB_I64: have = tp->n_int64_data; break;
    default: have = tp->n_int32_data; break; /* i32, u8, i8, bool, and f16/bf16 as their bits */
    }
    if ((uint64_t)have != (uint64_t)numel) {
        nb__error("nb_onnx: %s: %zu elements of data, its shape needs %lld", what, have, (long long)numel);
        return NULL;
    }
    t = nb_keep(nb_empty(shape, dt));
    bool was = nb__trace_suspend(true); /* filling a new tensor reads nothing of the graph */
    void *p = t ? nb_data_ptr(t) : NULL;
    nb__trace_suspend(was);
    if (!p && numel) { nb_release(t); return NULL; }
    for (int64_t i = 0; i < numel; i++) {
        switch (dt) {
        case NB_F32: ((float *)p)[i] = tp->float_data[i]; break;
        case NB_F64: ((double *)p)[i] = tp->double_data[i]; break;
        case NB_I64: ((int64_t *)p)[i] = tp->int64_data[i]; break;
        case NB_I32: ((int32_t *)p)[i] = tp->int32_data[i]; break;
        case NB_F16: case NB_BF16: ((uint16_t *)p)[i] = (uint16_t)tp->int32_data[i]; break;
        case NB_U8: ((uint8_t *)p)[i] = (uint8_t)tp->int32_data[i]; break;
        case NB_I8: ((int8_t *)p)[i] = (int8_t)tp->int32_data[i]; break;
        case NB_BOOL: ((bool *)p)[i] = tp->int32_data[i] != 0; break;
        default: break;
        }
    }
    return t;
}

nb_tensor *nb__onnx_const(const void *data, nb_shape shape, nb_dtype dtype) {
    bool was = nb__trace_suspend(true);
    nb_tensor *t = nb_from_data(data, shape, dtype);
    nb__trace_suspend(was);
    return t;
}

/* Whether t may be read on the host now: always when running eagerly; while tracing, only when it
   is a known value among the running node's inputs (else it has no elements yet). */
static bool readable(onnx_run *r, nb_tensor *t, const char *what) {
    if (!r->tracing) return true;
    const onnx_node *n = r->node;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0 && r->vals[n->in[k]] == t && r->known[n->in[k]]) return true;
    nb__onnx_node_error(n, "%s depends on the model's input values, so the model cannot be compiled "
                        "(run it with compile off)", what);
    return false;
}

int nb__onnx_read_ints(onnx_run *r, nb_tensor *t, const char *what, int64_t *v, int cap) {
    if (!t) { nb__onnx_node_error(r->node, "%s is missing", what); return -1; }
    if (nb_ndim(t) > 1) { nb__onnx_node_error(r->node, "%s must be 1-D, not %d-D", what, nb_ndim(t)); return -1; }
    nb_dtype d = nb_dtype_of(t);
    if (d != NB_I64 && d != NB_I32) {
        nb__onnx_node_error(r->node, "%s must be int64 or int32, not %s", what, nb_dtype_name(d));
        return -1;
    }
    int64_t n = nb_numel(t);
    if (n > cap) { nb__onnx_node_error(r->node, "%s has %lld values, at most %d allowed", what, (long long)n, cap); return -1; }
    if (!readable(r, t, what)) return -1;
    bool was = nb__trace_suspend(true); /* a known value is a real tensor: reading it is no trace read */
    nb_tensor *c = nb_cast(t, NB_I64); /* the run's scope owns it */
    int rc = c && nb_copy_to(c, v, (size_t)n * sizeof(int64_t)) == 0 ? (int)n : -1;
    nb__trace_suspend(was);
    return rc;
}

double nb__onnx_read_scalar(onnx_run *r, nb_tensor *t, const char *what, bool *ok) {
    *ok = false;
    if (!t) { nb__onnx_node_error(r->node, "%s is missing", what); return NAN; }
    if (nb_numel(t) != 1) {
        nb__onnx_node_error(r->node, "%s must hold one value, not %lld", what, (long long)nb_numel(t));
        return NAN;
    }
    if (!readable(r, t, what)) return NAN;
    bool was = nb__trace_suspend(true);
    nb_tensor *c = nb_cast(t, NB_F64);
    double v = NAN;
    if (c && nb_copy_to(c, &v, sizeof v) == 0) *ok = true; /* c: the run's scope owns it */
    nb__trace_suspend(was);
    return v;
}

/* ---------- the operator table's lookups ---------- */
const onnx_op *nb__onnx_find_op(const char *name) {
    for (const onnx_op *o = nb__onnx_import_ops; o->name; o++)
        if (!strcmp(o->name, name)) return o;
    return NULL;
}

int nb__onnx_op_version(const onnx_op *op, int opset) {
    int best = 0;
    for (const char *p = op->history; *p;) {
        int v = atoi(p);
        if (v <= opset && v > best) best = v;
        while (*p && *p != ',') p++;
        if (*p) p++;
    }
    return best;
}

/* ---------- attribute schemas ---------- */
static const char *const attr_types[] = { "undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
                                          "strings", "tensors", "graphs", "sparse tensor", "sparse tensors",
                                          "type", "types" };

const char *nb__onnx_attr_type_name(int type) {
    return type >= 0 && type < (int)(sizeof attr_types / sizeof attr_types[0]) ? attr_types[type] : "unknown type";
}

bool nb__onnx_next_attr_spec(const char **p, onnx_attr_spec *a) {
    const char *s = *p;
    if (!*s) return false;
    const char *e = s + strcspn(s, ","), *colon = memchr(s, ':', (size_t)(e - s));
    *p = *e ? e + 1 : e;
    *a = (onnx_attr_spec){ .lo = 0, .hi = INT_MAX };
    if (!colon || colon - s >= (ptrdiff_t)sizeof a->name) return false;
    memcpy(a->name, s, (size_t)(colon - s));
    const char *t = colon + 1, *te = t;
    while (te < e && *te != '!' && *te != '@') te++;
    for (int k = 1; k < (int)(sizeof attr_types / sizeof attr_types[0]) && !a->type; k++)
        if (strlen(attr_types[k]) == (size_t)(te - t) && !strncmp(attr_types[k], t, (size_t)(te - t))) a->type = k;
    if (te < e && *te == '!') a->required = true, te++;
    if (te < e && *te == '@') {
        char *q;
        te++;
        if (*te != '-') a->lo = (int)strtol(te, &q, 10), te = q;
        if (te < e && *te == '-') {
            te++;
            if (te < e) a->hi = (int)strtol(te, &q, 10), te = q;
        }
    }
    return a->type != 0 && te == e;
}

/* The type of an attribute: its type field, or (older files leave it unset) the one field
   holding a value; 0 when neither says. */
static int attr_type_of(const Onnx__AttributeProto *a) {
    if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return (int)a->type;
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
    if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
    return 0;
}

/* Checks a node's attributes against its operator's schema (the table's attrs) at the node's
   version: each is known, of that version, of its type and given once, and each required one
   is there. The one place these rules live: the operators read their attributes trusting them. */
static int check_attrs(const onnx_node *n, int opset) {
    const onnx_op *op = n->op;
    const Onnx__NodeProto *pb = n->pb;
    for (size_t k = 0; k < pb->n_attribute; k++) {
        const Onnx__AttributeProto *a = pb->attribute[k];
        const char *name = str(a->name);
        if (a->ref_attr_name && *a->ref_attr_name) {
            nb__onnx_node_error(n, "attribute '%s' refers to a function's attribute, which is not supported", name);
            return -1;
        }
        for (size_t j = 0; j < k; j++)
            if (!strcmp(str(pb->attribute[j]->name), name)) {
                nb__onnx_node_error(n, "attribute '%s' is given twice", name);
                return -1;
            }
        onnx_attr_spec sp;
        bool known = false, found = false;
        int lo = 0, hi = 0;
        for (const char *p = op->attrs; !found && nb__onnx_next_attr_spec(&p, &sp);)
            if (!strcmp(sp.name, name)) {
                known = true, lo = sp.lo, hi = sp.hi;
                found = n->version >= sp.lo && n->version <= sp.hi;
            }
        if (!known) {
            nb__onnx_node_error(n, "attribute '%s' is not supported (opset %d)", name, opset);
            return -1;
        }
        if (!found) {
            char vers[48];
            if (hi == INT_MAX) snprintf(vers, sizeof vers, "from version %d", lo);
            else if (lo <= op->min_v) snprintf(vers, sizeof vers, "up to version %d", hi);
            else snprintf(vers, sizeof vers, "in versions %d to %d", lo, hi);
            nb__onnx_node_error(n, "attribute '%s' is not one of %s version %d's (opset %d); it exists %s", name,
                                op->name, n->version, opset, vers);
            return -1;
        }
        int t = attr_type_of(a);
        if (t != sp.type) {
            if (!t) nb__onnx_node_error(n, "attribute '%s' has no type and no value; %s's '%s' is of type %s", name,
                                        op->name, name, nb__onnx_attr_type_name(sp.type));
            else nb__onnx_node_error(n, "attribute '%s' is of type %s; %s's '%s' is of type %s", name,
                                     nb__onnx_attr_type_name(t), op->name, name, nb__onnx_attr_type_name(sp.type));
            return -1;
        }
    }
    onnx_attr_spec sp;
    for (const char *p = op->attrs; nb__onnx_next_attr_spec(&p, &sp);)
        if (sp.required && n->version >= sp.lo && n->version <= sp.hi && !nb__onnx_attr(n, sp.name)) {
            nb__onnx_node_error(n, "required attribute '%s' (%s) is missing (%s version %d, opset %d)", sp.name,
                                nb__onnx_attr_type_name(sp.type), op->name, n->version, opset);
            return -1;
        }
    return 0;
}

/* ---------- loading ---------- */
/* A name-to-value-id hash table over the graph's names. */
typedef struct {
    const char **key;
    int *id;
    size_t cap;
} name_map;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_find(const name_map *m, const char *s) {
    for (size_t i = hash_str(s) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->key[i]) return -1;
        if (!strcmp(m->key[i], s)) return m->id[i];
    }
}

static void map_put(name_map *m, const char *s, int id) {
    size_t i = hash_str(s) & (m->cap - 1);
    while (m->key[i]) i = (i + 1) & (m->cap - 1);
    m->key[i] = s;
    m->id[i] = id;
}

typedef struct {
    nb_onnx_model *m;
    name_map names;
    int capv;
    const char *dir;
} loader;

/* A new value id for name; -1 when out of memory. */
static int add_value(loader *L, const char *name) {
    nb_onnx_model *m = L->m;
    if (m->nv == L->capv) {
        int cap = L->capv ? L->capv * 2 : 64;
        onnx_value *v = realloc(m->v, sizeof *v * (size_t)cap);
        if (!v) return -1;
        m->v = v;
        L->capv = cap;
    }
    m->v[m->nv] = (onnx_value){ .name = name, .input = -1, .producer = -1, .last_use = -1 };
    map_put(&L->names, name, m->nv);
    return m->nv++;
}

static int load_inputs(loader *L, const Onnx__GraphProto *g) {
    nb_onnx_model *m = L->m;
    m->inputs = calloc(g->n_input ? g->n_input : 1, sizeof *m->inputs);
    if (!m->inputs) return -1;
    for (size_t k = 0; k < g->n_input; k++) {
        const Onnx__ValueInfoProto *vi = g->input[k];
        const char *name = str(vi->name);
        if (!*name) { nb__error("nb_onnx_load: graph input %zu has no name", k); return -1; }
        int id = map_find(&L->names, name);
        if (id >= 0 && m->v[id].init) continue; /* an initializer listed as an input (IR < 4): a constant */
        if (id >= 0) { nb__error("nb_onnx_load: graph input '%s' is listed twice", name); return -1; }
        const Onnx__TypeProto *tp = vi->type;
        if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
            nb__error("nb_onnx_load: graph input '%s' is not a tensor (sequences, maps and optionals are not supported)", name);
            return -1;
        }
        onnx_input *in = &m->inputs[m->ninputs];
        in->name = name;
        if (!nb__onnx_to_dtype(tp->tensor_type->elem_type, &in->dtype)) {
            nb__error("nb_onnx_load: graph input '%s' has ONNX data type %d, which nabla lacks", name,
                      (int)tp->tensor_type->elem_type);
            return -1;
        }
        in->ndim = -1;
        const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
        if (sh) {
            if (sh->n_dim > NB_MAX_DIMS) {
                nb__error("nb_onnx_load: graph input '%s' has %zu dimensions; nabla allows at most %d", name, sh->n_dim, NB_MAX_DIMS);
                return -1;
            }
            in->ndim = (int)sh->n_dim;
            for (size_t d = 0; d < sh->n_dim; d++) {
                const Onnx__TensorShapeProto__Dimension *dm = sh->dim[d];
                in->dim[d] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dm->dim_value : -1;
                /* a symbolic or missing size is unknown; so is -1, which some exporters write for one */
                if (in->dim[d] < -1) {
                    nb__error("nb_onnx_load: graph input '%s' declares dimension %zu as %lld; a size is 0 or more "
                              "(a symbolic one is a dim_param)", name, d, (long long)in->dim[d]);
                    return -1;
                }
            }
        }
        if ((in->value = add_value(L, name)) < 0) return -1;
        m->v[in->value].input = m->ninputs++;
    }
    return 0;
}

static int check_node(loader *L, onnx_node *n) {
    const Onnx__NodeProto *pb = n->pb;
    const char *dom = str(pb->domain);
    if (*dom && strcmp(dom, "ai.onnx")) {
        nb__onnx_node_error(n, "operator domain '%s' is not supported (only the default ONNX domain)", dom);
        return -1;
    }
    const onnx_op *op = nb__onnx_find_op(str(pb->op_type));
    int opset = L->m->opset;
    if (!op) {
        nb__onnx_node_error(n, "operator %s is not supported (opset %d)", str(pb->op_type), opset);
        return -1;
    }
    n->op = op;
    n->version = nb__onnx_op_version(op, opset);
    if (n->version < op->min_v || n->version > op->max_v) {
        nb__onnx_node_error(n, "operator %s at opset %d is its version %d; nabla implements versions %d to %d",
                            op->name, opset, n->version, op->min_v, op->max_v);
        return -1;
    }
    if (check_attrs(n, opset) < 0) return -1;
    if (n->nin < op->min_in || n->nin > op->max_in) {
        nb__onnx_node_error(n, "%d inputs; the operator takes %d to %d", n->nin, op->min_in, op->max_in);
        return -1;
    }
    if (n->nout < 1 || n->nout > op->max_out) {
        nb__onnx_node_error(n, "%d outputs; nabla supports 1 to %d of this operator", n->nout, op->max_out);
        return -1;
    }
    char msg[400];
    if (op->check && op->check(n, msg, sizeof msg) < 0) {
        nb__onnx_node_error(n, "%s (opset %d)", msg, opset);
        return -1;
    }
    return 0;
}

/* Resolves the nodes' names, orders them topologically (Kahn) and checks each one. */
static int load_nodes(loader *L, const Onnx__GraphProto *g) {
    nb_onnx_model *m = L->m;
    size_t nn = g->n_node;
    onnx_node *raw = calloc(nn ? nn : 1, sizeof *raw);
    m->nodes = calloc(nn ? nn : 1, sizeof *m->nodes);
    int *pending = calloc(nn ? nn : 1, sizeof(int)), *queue = calloc(nn ? nn : 1, sizeof(int));
    int rc = -1;
    if (!raw || !m->nodes || !pending || !queue) { nb__error("nb_onnx_load: out of memory"); goto done; }
    /* outputs first, so inputs can name values made by later nodes (the file need not be sorted) */
    for (size_t i = 0; i < nn; i++) {
        onnx_node *n = &raw[i];
        n->pb = g->node[i];
        n->index = (int)i;
        n->nin = (int)n->pb->n_input;
        n->nout = (int)n->pb->n_output;
        n->in = malloc(sizeof(int) * (size_t)(n->nin + 1));
        n->out = malloc(sizeof(int) * (size_t)(n->nout + 1));
        if (!n->in || !n->out) { nb__error("nb_onnx_load: out of memory"); goto done; }
        for (int k = 0; k < n->nout; k++) {
            const char *o = str(n->pb->output[k]);
            n->out[k] = -1;
            if (!*o) continue;
            if (map_find(&L->names, o) >= 0) {
                nb__onnx_node_error(n, "output '%s' is already a value of the graph (names must be unique)", o);
                goto done;
            }
            if ((n->out[k] = add_value(L, o)) < 0) { nb__error("nb_onnx_load: out of memory"); goto done; }
            m->v[n->out[k]].producer = (int)i;
        }
    }
    for (size_t i = 0; i < nn; i++) {
        onnx_node *n = &raw[i];
        for (int k = 0; k < n->nin; k++) {
            const char *s = str(n->pb->input[k]);
            n->in[k] = -1;
            if (!*s) continue;
            if ((n->in[k] = map_find(&L->names, s)) < 0) {
                nb__onnx_node_error(n, "input '%s' is no graph input, initializer or node output", s);
                goto done;
            }
            if (m->v[n->in[k]].producer >= 0) pending[i]++;
        }
    }
    /* Kahn's algorithm, taking ready nodes in file order */
    int head = 0, tail = 0;
    for (size_t i = 0; i < nn; i++)
        if (!pending[i]) queue[tail++] = (int)i;
    while (head < tail) {
        int i = queue[head++];
        m->nodes[m->nn++] = raw[i];
        for (int k = 0; k < raw[i].nout; k++) {
            int v = raw[i].out[k];
            if (v < 0) continue;
            /* every node reading v has one pending count per reading input */
            for (size_t j = 0; j < nn; j++)
                for (int q = 0; q < raw[j].nin; q++)
                    if (raw[j].in[q] == v && --pending[j] == 0) queue[tail++] = (int)j;
        }
    }
    if (m->nn != (int)nn) {
        for (size_t i = 0; i < nn; i++)
            if (pending[i]) {
                nb__onnx_node_error(&raw[i], "the graph has a cycle through this node (its nodes cannot be ordered so "
                                    "each runs after the values it reads)");
                break;
            }
        goto done;
    }
    for (int i = 0; i < m->nn; i++) {
        if (check_node(L, &m->nodes[i]) < 0) goto done;
        for (int k = 0; k < m->nodes[i].nin; k++)
            if (m->nodes[i].in[k] >= 0) m->v[m->nodes[i].in[k]].last_use = i;
    }
    rc = 0;
done:
    if (rc < 0 && raw) { /* the nodes not yet handed to m own their arrays */
        for (size_t i = 0; i < nn; i++) {
            bool moved = false;
            for (int j = 0; j < m->nn; j++) moved |= m->nodes[j].in == raw[i].in;
            if (!moved) { free(raw[i].in); free(raw[i].out); }
        }
    }
    free(raw);
    free(pending);
    free(queue);
    return rc;
}

static int load_graph(loader *L) {
    nb_onnx_model *m = L->m;
    const Onnx__ModelProto *pb = m->pb;
    const Onnx__GraphProto *g = pb->graph;
    if (!g) { nb__error("nb_onnx_load: the model has no graph (not an ONNX model, or truncated)"); return -1; }
    m->opset = -1;
    for (size_t k = 0; k < pb->n_opset_import; k++) {
        const char *d = str(pb->opset_import[k]->domain);
        if (!*d || !strcmp(d, "ai.onnx")) m->opset = (int)pb->opset_import[k]->version;
    }
    if (m->opset < 0) m->opset = 1; /* none named (IR 2, or other domains only): opset 1 */
    if (m->opset < 1 || m->opset > 1000) { nb__error("nb_onnx_load: opset %d is not a valid version", m->opset); return -1; }
    if (g->n_sparse_initializer) { nb__error("nb_onnx_load: sparse initializers are not supported"); return -1; }
    size_t nvals = g->n_initializer + g->n_input + 1;
    for (size_t i = 0; i < g->n_node; i++) nvals += g->node[i]->n_output;
    if (nvals > (size_t)INT_MAX / 4) { nb__error("nb_onnx_load: the graph is too large"); return -1; }
    L->names.cap = 16;
    while (L->names.cap < nvals * 2) L->names.cap *= 2;
    L->names.key = calloc(L->names.cap, sizeof *L->names.key);
    L->names.id = calloc(L->names.cap, sizeof *L->names.id);
    if (!L->names.key || !L->names.id) { nb__error("nb_onnx_load: out of memory"); return -1; }
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *tp = g->initializer[k];
        const char *name = str(tp->name);
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", name);
        if (!*name) { nb__error("nb_onnx_load: initializer %zu has no name", k); return -1; }
        if (map_find(&L->names, name) >= 0) { nb__error("nb_onnx_load: %s is given twice", what); return -1; }
        nb_tensor *t = nb__onnx_tensor(tp, L->dir, what);
        if (!t) return -1;
        int id = add_value(L, name);
        if (id < 0) { nb_release(t); nb__error("nb_onnx_load: out of memory"); return -1; }
        m->v[id].init = t;
    }
    if (load_inputs(L, g) < 0) {
        if (!nb__has_error()) nb__error("nb_onnx_load: out of memory");
        return -1;
    }
    if (load_nodes(L, g) < 0) return -1;
    m->outputs = calloc(g->n_output ? g->n_output : 1, sizeof(int));
    if (!m->outputs) { nb__error("nb_onnx_load: out of memory"); return -1; }
    if (!g->n_output) { nb__error("nb_onnx_load: the graph has no outputs"); return -1; }
    for (size_t k = 0; k < g->n_output; k++) {
        const char *name = str(g->output[k]->name);
        int id = map_find(&L->names, name);
        if (id < 0) { nb__error("nb_onnx_load: graph output '%s' is made by no node, input or initializer", name); return -1; }
        m->v[id].is_output = true;
        m->outputs[m->noutputs++] = id;
    }
    return 0;
}

static nb_tensor *compiled_fn(nb_tensor *const *inputs, int n, void *ctx);
static int run_node(onnx_run *r, const onnx_node *n, nb_tensor **vals);

/* Constant folding at load: a node whose inputs are initializers alone (a weight's Transpose,
   a Constant, a batch norm folded by arithmetic) runs once here and its outputs become
   initializers, so no run repeats it. Nodes that read shapes or draw random numbers stay. */
static int fold_constants(nb_onnx_model *m) {
    nb_tensor **vals = calloc((size_t)m->nv + 1, sizeof *vals);
    if (!vals) { nb__error("nb_onnx_load: out of memory"); return -1; }
    for (int i = 0; i < m->nv; i++) vals[i] = m->v[i].init;
    bool grad = nb_is_grad_enabled();
    nb_set_grad_enabled(false);
    nb_scope *s = nb_scope_begin();
    onnx_run r = { .m = m, .vals = vals };
    int rc = 0;
    for (int i = 0; i < m->nn && rc == 0; i++) {
        onnx_node *n = &m->nodes[i];
        bool all = !(n->op->flags & (OP_SHAPE_ONLY | OP_NEVER_KNOWN));
        for (int k = 0; k < n->nin && all; k++) all = n->in[k] < 0 || vals[n->in[k]];
        if (!all) continue;
        rc = run_node(&r, n, vals);
        for (int k = 0; k < n->nout && rc == 0; k++)
            if (n->out[k] >= 0) m->v[n->out[k]].init = nb_keep(vals[n->out[k]]);
        n->folded = rc == 0;
    }
    nb_scope_end(s);
    nb_set_grad_enabled(grad);
    free(vals);
    return rc;
}

/* ---------- nesting ---------- */
/* How deep messages may nest below the model: protobuf's own default recursion limit, which
   onnx (upb) and ONNX Runtime (protobuf C++) apply when they parse a model, so a file they read
   is read here too. */
#define NB_ONNX_MAX_NESTING 100

/* The field numbered id of a message type, or NULL (an unknown field, kept unparsed). */
static const ProtobufCFieldDescriptor *field_of(const ProtobufCMessageDescriptor *d, uint64_t id) {
    for (unsigned i = 0; i < d->n_fields; i++)
        if (d->fields[i].id == id) return &d->fields[i];
    return NULL;
}

/* protobuf-c unpacks a message inside a message by recursion, with no limit, and the schema
   nests without bound (a subgraph in a node's attribute holds nodes with subgraphs; a sequence
   type holds a type): 3,000 subgraphs deep, 75 kB, overflowed the stack. So the bytes are
   walked first, iteratively, following the same descriptors protobuf-c follows (only known
   message fields of wire type 2 are unpacked as messages), and a model nesting deeper than
   the limit is refused. Malformed bytes end the walk: protobuf-c then refuses them itself. */
static int check_nesting(const uint8_t *data, size_t size) {
    struct {
        nb_pb_reader r;
        const ProtobufCMessageDescriptor *d;
    } st[NB_ONNX_MAX_NESTING + 1];
    int top = 0;
    st[0].r = (nb_pb_reader){ data, data + size, false };
    st[0].d = &onnx__model_proto__descriptor;
    for (;;) {
        nb_pb_field f;
        if (!nb__pb_next(&st[top].r, &f)) {
            if (st[top].r.bad || top == 0) return 0; /* malformed (groups too): protobuf-c refuses it */
            top--;                                   /* the message ended: back to its parent */
            continue;
        }
        const ProtobufCFieldDescriptor *fd = f.wire == 2 ? field_of(st[top].d, f.field) : NULL;
        if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (top == NB_ONNX_MAX_NESTING) {
            int graphs = 0, types = 0;
            for (int i = 0; i <= top; i++) {
                graphs += st[i].d == &onnx__graph_proto__descriptor;
                types += st[i].d == &onnx__type_proto__descriptor;
            }
            const ProtobufCMessageDescriptor *in = fd->descriptor;
            graphs += in == &onnx__graph_proto__descriptor;
            types += in == &onnx__type_proto__descriptor;
            nb__error("nb_onnx_load: the model's protobuf messages nest %d levels deep at byte %zu (%d graph%s "
                      "through node attributes and %d type%s, one inside another); the limit is %d, as in onnx "
                      "and ONNX Runtime", top + 1, (size_t)(f.bytes - data), graphs, graphs == 1 ? "" : "s", types,
                      types == 1 ? "" : "s", NB_ONNX_MAX_NESTING);
            return -1;
        }
        top++;
        st[top].r = (nb_pb_reader){ f.bytes, f.bytes + f.len, false };
        st[top].d = fd->descriptor;
    }
}

static nb_onnx_model *load(const void *data, size_t size, const char *dir, nb_onnx_load_opts opts, nb__map *map) {
    if (size > (size_t)INT32_MAX) {
        /* protobuf messages are limited to 2 GB; larger models keep their weights as external data */
        nb__error("nb_onnx_load: %zu bytes is more than a protobuf message may hold (2 GB); "
                  "large models keep their weights in external data files", size);
        return NULL;
    }
    nb_onnx_model *m = calloc(1, sizeof *m);
    if (!m) { nb__error("nb_onnx_load: out of memory"); return NULL; }
    if (map) m->map = *map;
    m->opts = opts;
    if (check_nesting(data, size) < 0) {
        nb_onnx_free(m);
        return NULL;
    }
    m->pb = onnx__model_proto__unpack(NULL, size, data);
    if (!m->pb) {
        nb__error("nb_onnx_load: not a valid ONNX model: the protobuf is corrupt or truncated (%zu bytes)", size);
        nb_onnx_free(m);
        return NULL;
    }
    loader L = { .m = m, .dir = dir };
    int rc = load_graph(&L);
    free(L.names.key);
    free(L.names.id);
    if (rc == 0) rc = fold_constants(m);
    /* the initializers are the model's alone and never written: kernels may keep forms of them */
    for (int i = 0; rc == 0 && i < m->nv; i++) nb__tensor_freeze(m->v[i].init);
    if (rc == 0 && opts.compile) {
        if (m->noutputs != 1) {
            nb__error("nb_onnx_load: compile needs a model with one output; this one has %d", m->noutputs);
            rc = -1;
        } else if (!(m->compiled = nb_compile(compiled_fn, m, opts.graph))) rc = -1;
    }
    if (rc < 0) {
        nb_onnx_free(m);
        return NULL;
    }
    return m;
}

nb_onnx_model *nb_onnx_load(const char *path, nb_onnx_load_opts opts) {
    if (!path) { nb__error("nb_onnx_load: path is NULL"); return NULL; }
    nb__map map;
    if (nb__map_open(&map, "nb_onnx_load", path) < 0) return NULL;
    char *dir = strdup(path);
    if (!dir) { nb__map_close(&map); nb__error("nb_onnx_load: out of memory"); return NULL; }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    if (slash == dir) strcpy(dir, "/");
    /* an error from inside the file gets the path after it: reworded in a quiet context, so a
       handler hears the whole message once */
    nb__error_ctx ec;
    nb__error_quiet(&ec);
    nb_onnx_model *m = load(map.data, map.size, dir, opts, &map);
    if (!m) {
        if (nb__has_error()) nb__error_reword("%s (%s)", nb_error(), path);
        else nb__error("nb_onnx_load: failed (%s)", path);
    }
    nb__error_pop(&ec);
    if (m) {
        /* protobuf-c copied what it keeps: the mapping is no longer needed */
        nb__map_close(&m->map);
    }
    free(dir);
    return m;
}

nb_onnx_model *nb_onnx_load_memory(const void *data, size_t size, nb_onnx_load_opts opts) {
    if (!data && size) { nb__error("nb_onnx_load_memory: data is NULL"); return NULL; }
    return load(data ? data : "", size, NULL, opts, NULL);
}

void nb_onnx_free(nb_onnx_model *m) {
    if (!m) return;
    nb_compiled_free(m->compiled);
    for (int i = 0; i < m->nv; i++) nb_release(m->v[i].init);
    for (int i = 0; i < m->nn; i++) {
        free(m->nodes[i].in);
        free(m->nodes[i].out);
    }
    free(m->v);
    free(m->nodes);
    free(m->inputs);
    free(m->outputs);
    if (m->pb) onnx__model_proto__free_unpacked(m->pb, NULL);
    nb__map_close(&m->map);
    free(m);
}

int nb_onnx_num_inputs(const nb_onnx_model *m) { return m ? m->ninputs : 0; }
int nb_onnx_num_outputs(const nb_onnx_model *m) { return m ? m->noutputs : 0; }
const char *nb_onnx_input_name(const nb_onnx_model *m, int i) {
    return m && i >= 0 && i < m->ninputs ? m->inputs[i].name : NULL;
}
const char *nb_onnx_output_name(const nb_onnx_model *m, int i) {
    return m && i >= 0 && i < m->noutputs ? m->v[m->outputs[i]].name : NULL;
}
int nb_onnx_opset(const nb_onnx_model *m) { return m ? m->opset : 0; }

int nb_onnx_input_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims) {
    if (!m || i < 0 || i >= m->ninputs) return -1;
    const onnx_input *in = &m->inputs[i];
    if (dtype) *dtype = in->dtype;
    if (ndim) *ndim = in->ndim;
    for (int d = 0; dims && d < in->ndim; d++) dims[d] = in->dim[d];
    return 0;
}

int nb_onnx_output_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims) {
    if (!m || i < 0 || i >= m->noutputs || (size_t)i >= m->pb->graph->n_output) return -1;
    const Onnx__TypeProto *tp = m->pb->graph->output[i]->type; /* outputs are the graph's, in order */
    nb_dtype d;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type ||
        !nb__onnx_to_dtype(tp->tensor_type->elem_type, &d))
        return -1;
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (dtype) *dtype = d;
    if (ndim) *ndim = sh && sh->n_dim <= NB_MAX_DIMS ? (int)sh->n_dim : -1;
    for (size_t k = 0; dims && sh && sh->n_dim <= NB_MAX_DIMS && k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        dims[k] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dm->dim_value >= 0 ? dm->dim_value : -1;
    }
    return 0;
}

/* ---------- running ---------- */
static bool is_half(nb_dtype d) { return d == NB_F16 || d == NB_BF16; }

/* Runs one node: its inputs from vals, its outputs into vals. */
static int run_node(onnx_run *r, const onnx_node *n, nb_tensor **vals) {
    nb_tensor *in_stack[16], *out_stack[16];
    nb_tensor **in = n->nin <= 16 ? in_stack : calloc((size_t)n->nin, sizeof *in);
    nb_tensor **out = n->nout <= 16 ? out_stack : calloc((size_t)n->nout, sizeof *out);
    int rc = -1;
    if (!in || !out) { nb__error("nb_onnx_run: out of memory"); goto done; }
    r->node = n;
    nb_dtype half = NB_F32;
    for (int k = 0; k < n->nin; k++) {
        in[k] = n->in[k] >= 0 ? vals[n->in[k]] : NULL;
        if (in[k] && is_half(nb_dtype_of(in[k])) && (n->op->flags & OP_HALF_UPCAST)) {
            half = nb_dtype_of(in[k]);
            in[k] = nb_cast(in[k], NB_F32);
        }
    }
    for (int k = 0; k < n->nout; k++) out[k] = NULL;
    uint64_t errs = nb__error_count();
    /* an op inside that fails is told with the node's words before its own: reworded in a quiet
       context, so a handler hears the whole message once */
    nb__error_ctx ec;
    nb__error_quiet(&ec);
    rc = n->op->run(r, n, in, n->nin, out, n->nout);
    for (int k = 0; k < n->nout && rc == 0; k++) {
        if (n->out[k] < 0) continue;
        if (!out[k]) {
            if (nb__error_count() == errs) nb__onnx_node_error(n, "output %d was not computed", k);
            rc = -1;
            break;
        }
        if (half != NB_F32 && nb_dtype_of(out[k]) == NB_F32) out[k] = nb_cast(out[k], half);
        vals[n->out[k]] = out[k];
    }
    if (rc < 0 && nb_error() && !strstr(nb_error(), "nb_onnx")) {
        char label[400];
        node_label(n, label, sizeof label);
        nb__error_reword("%s: %s", label, nb_error());
    }
    nb__error_pop(&ec);
done:
    if (in != in_stack) free(in);
    if (out != out_stack) free(out);
    return rc;
}

/* Runs the graph on inputs (checked) inside the caller's scope; the outputs' tensors go to out. */
static int interpret(nb_onnx_model *m, nb_tensor *const *inputs, bool tracing, nb_tensor **out, int nout) {
    nb_tensor **vals = calloc((size_t)m->nv + 1, sizeof *vals);
    bool *known = calloc((size_t)m->nv + 1, sizeof *known);
    if (!vals || !known) { free(vals); free(known); nb__error("nb_onnx_run: out of memory"); return -1; }
    for (int i = 0; i < m->nv; i++)
        if (m->v[i].init) vals[i] = m->v[i].init, known[i] = true;
    for (int i = 0; i < m->ninputs; i++) vals[m->inputs[i].value] = inputs[i];
    onnx_run r = { .m = m, .tracing = tracing, .vals = vals, .known = known };
    int rc = 0;
    for (int i = 0; i < m->nn && rc == 0; i++) {
        const onnx_node *n = &m->nodes[i];
        if (n->folded) continue; /* its outputs are initializers now */
        /* A node of known values only (initializers, constants, shapes) runs with the tracer
           paused, so its results are real tensors that later nodes can read on the host (a
           Reshape's shape) and the graph gets them as constants. Shape and Size read shapes
           alone, which a trace knows. */
        bool k_all = !(n->op->flags & OP_NEVER_KNOWN);
        for (int k = 0; k < n->nin && k_all; k++)
            if (n->in[k] >= 0) k_all = known[n->in[k]];
        if (n->op->flags & OP_SHAPE_ONLY) k_all = true;
        bool was = false;
        if (tracing && k_all) was = nb__trace_suspend(true);
        rc = run_node(&r, n, vals);
        if (tracing && k_all) nb__trace_suspend(was);
        for (int k = 0; k < n->nout && rc == 0; k++)
            if (n->out[k] >= 0) known[n->out[k]] = k_all;
    }
    for (int k = 0; k < nout && rc == 0; k++) out[k] = vals[m->outputs[k]];
    free(vals);
    free(known);
    return rc;
}

/* Checks the run's inputs against the model's declarations. */
static int check_inputs(nb_onnx_model *m, nb_tensor *const *inputs, int n) {
    if (n != m->ninputs) {
        nb__error("nb_onnx_run: the model takes %d input%s, %d given", m->ninputs, m->ninputs == 1 ? "" : "s", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const onnx_input *in = &m->inputs[i];
        nb_tensor *t = inputs[i];
        if (!t) { nb__error("nb_onnx_run: input %d ('%s') is NULL", i, in->name); return -1; }
        if (nb_dtype_of(t) != in->dtype) {
            nb__error("nb_onnx_run: input %d ('%s') is %s; the model declares %s", i, in->name,
                      nb_dtype_name(nb_dtype_of(t)), nb_dtype_name(in->dtype));
            return -1;
        }
        nb_shape s = nb_shape_of(t);
        bool ok = in->ndim < 0 || in->ndim == s.ndim;
        for (int d = 0; ok && in->ndim >= 0 && d < s.ndim; d++) ok = in->dim[d] < 0 || in->dim[d] == s.dim[d];
        if (!ok) {
            char got[128], want[200];
            nb_shape_str(s, got, sizeof got);
            size_t l = 0;
            want[l++] = '[';
            for (int d = 0; d < in->ndim && l < sizeof want - 24; d++) {
                if (d) l += (size_t)snprintf(want + l, sizeof want - l, ", ");
                if (in->dim[d] < 0) l += (size_t)snprintf(want + l, sizeof want - l, "?");
                else l += (size_t)snprintf(want + l, sizeof want - l, "%lld", (long long)in->dim[d]);
            }
            snprintf(want + l, sizeof want - l, "]");
            nb__error("nb_onnx_run: input %d ('%s') has shape %s; the model declares %s (? is any size)", i, in->name,
                      got, want);
            return -1;
        }
    }
    return 0;
}

static nb_tensor *compiled_fn(nb_tensor *const *inputs, int n, void *ctx) {
    nb_onnx_model *m = ctx;
    nb_tensor *out = NULL;
    if (interpret(m, inputs, true, &out, 1) < 0) return NULL;
    return out;
}

int nb_onnx_run(nb_onnx_model *m, nb_tensor *const *inputs, int n, nb_tensor **out, int nout) {
    if (!m) { nb__error("nb_onnx_run: model is NULL"); return -1; }
    if (!out && nout) { nb__error("nb_onnx_run: out is NULL"); return -1; }
    if (nout < 0 || nout > m->noutputs) {
        nb__error("nb_onnx_run: %d outputs asked for; the model has %d", nout, m->noutputs);
        return -1;
    }
    if (n < 0 || (n && !inputs)) { nb__error("nb_onnx_run: inputs is NULL"); return -1; }
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (check_inputs(m, inputs, n) < 0) return -1;
    if (m->compiled) {
        if (nout < 1) return 0;
        nb_tensor *y = nb_compiled_run(m->compiled, inputs, n);
        if (!y) return -1;
        /* the replay may hand back a view of an initializer (y = Reshape(w)): the caller gets a
           copy, so the model's constants (and what kernels keep of them) stay as they are */
        if (y->storage->constant_id) {
            nb_tensor *c = nb_clone(y);
            nb_release(nb_keep(y)); /* y is the current scope's, or ours outside one: let it go */
            if (!c) return -1;
            y = c;
        }
        out[0] = nb_keep(y);
        return 0;
    }
    bool grad = nb_is_grad_enabled();
    nb_set_grad_enabled(false); /* inference: no autograd records */
    nb_scope *s = nb_scope_begin();
    if (!s) { nb_set_grad_enabled(grad); return -1; }
    nb_tensor *res[64], **r = nout <= 64 ? res : calloc((size_t)nout, sizeof *r);
    int rc = r ? interpret(m, inputs, false, r, nout) : -1;
    if (!r) nb__error("nb_onnx_run: out of memory");
    for (int k = 0; k < nout && rc == 0; k++) {
        /* a fresh tensor of its own for each output: an output may be an input or initializer */
        out[k] = nb_keep(nb_contiguous(r[k]));
        if (out[k] == r[k] || nb_shares_storage(out[k], r[k])) {
            nb_release(out[k]);
            out[k] = nb_keep(nb_clone(r[k]));
        }
        if (!out[k]) rc = -1;
    }
    if (rc < 0)
        for (int k = 0; k < nout; k++) { nb_release(out[k]); out[k] = NULL; }
    if (r != res) free(r);
    nb_scope_end(s);
    nb_set_grad_enabled(grad);
    return rc;
}

/* ---------- summary ---------- */
typedef struct {
    char *p;
    size_t n, cap;
    bool failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) { b->failed = true; return; }
        if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->failed = true; return; }
        b->p = q;
        b->cap = cap;
    }
}

static void sb_value_info(sbuf *b, const Onnx__ValueInfoProto *vi) {
    sb_printf(b, "  %s: ", str(vi->name));
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
        sb_printf(b, "(not a tensor)\n");
        return;
    }
    nb_dtype d;
    if (nb__onnx_to_dtype(tp->tensor_type->elem_type, &d)) sb_printf(b, "%s", nb_dtype_name(d));
    else sb_printf(b, "onnx type %d", (int)tp->tensor_type->elem_type);
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (!sh) { sb_printf(b, " (shape not given)\n"); return; }
    sb_printf(b, " [");
    for (size_t k = 0; k < sh->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = sh->dim[k];
        if (k) sb_printf(b, ", ");
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) sb_printf(b, "%lld", (long long)dm->dim_value);
        else if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM) sb_printf(b, "%s", str(dm->dim_param));
        else sb_printf(b, "?");
    }
    sb_printf(b, "]\n");
}

char *nb_onnx_summary(const nb_onnx_model *m) {
    if (!m) { nb__error("nb_onnx_summary: model is NULL"); return NULL; }
    const Onnx__ModelProto *pb = m->pb;
    const Onnx__GraphProto *g = pb->graph;
    sbuf b = { 0 };
    sb_printf(&b, "ONNX model: IR version %lld, producer %s %s, graph '%s'\n", (long long)pb->ir_version,
              *str(pb->producer_name) ? str(pb->producer_name) : "(none)", str(pb->producer_version), str(g->name));
    sb_printf(&b, "opsets:");
    for (size_t k = 0; k < pb->n_opset_import; k++)
        sb_printf(&b, " %s %lld", *str(pb->opset_import[k]->domain) ? str(pb->opset_import[k]->domain) : "ai.onnx",
                  (long long)pb->opset_import[k]->version);
    sb_printf(&b, "\ninputs (%d):\n", m->ninputs);
    for (size_t k = 0; k < g->n_input; k++) {
        bool is_init = false;
        for (int i = 0; i < m->nv && !is_init; i++) is_init = m->v[i].init && !strcmp(m->v[i].name, str(g->input[k]->name));
        if (!is_init) sb_value_info(&b, g->input[k]);
    }
    sb_printf(&b, "outputs (%d):\n", m->noutputs);
    for (size_t k = 0; k < g->n_output; k++) sb_value_info(&b, g->output[k]);
    /* operator counts, in the order each first appears */
    sb_printf(&b, "operators (%d nodes):\n", m->nn);
    for (size_t i = 0; i < g->n_node; i++) {
        const char *op = str(g->node[i]->op_type);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(str(g->node[j]->op_type), op);
        if (seen) continue;
        int count = 0;
        for (size_t j = i; j < g->n_node; j++) count += !strcmp(str(g->node[j]->op_type), op);
        sb_printf(&b, "  %-24s %d\n", op, count);
    }
    /* the file's initializers, each once: the values table also holds what constant folding made
       of them at load (a weight's Transpose), which would count a weight twice */
    int64_t elems = 0, folded = 0;
    bool huge = false;
    for (size_t k = 0; k < g->n_initializer; k++) {
        int64_t n = 1;
        for (size_t d = 0; d < g->initializer[k]->n_dims && !huge; d++)
            huge = g->initializer[k]->dims[d] < 0 || nb__mul_overflows(n, g->initializer[k]->dims[d], &n);
        huge = huge || (elems += n) < 0;
    }
    for (int i = 0; i < m->nv; i++) folded += m->v[i].init != NULL;
    folded -= (int64_t)g->n_initializer;
    if (huge) sb_printf(&b, "initializers: %zu, more elements than 2^63\n", g->n_initializer);
    else sb_printf(&b, "initializers: %zu, %lld elements\n", g->n_initializer, (long long)elems);
    if (folded > 0) sb_printf(&b, "constants folded at load: %lld\n", (long long)folded);
    if (b.failed) {
        free(b.p);
        nb__error("nb_onnx_summary: out of memory");
        return NULL;
    }
    return b.p;
}
