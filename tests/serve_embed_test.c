/* The model server embedded in a C program (nabla/serve.h): a nabla model.safetensors in version
   folders served on a free loopback port, a TF Serving predict over a plain socket compared bit
   for bit with the module's own forward pass, the newest version chosen, and start's errors. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <nabla.h>
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char CONFIG[] = "{\"name\": \"tiny\", \"input\": [6], \"layers\": [{\"type\": \"linear\", \"out\": 5}, "
                             "{\"type\": \"relu\"}, {\"type\": \"linear\", \"out\": 3}]}";

static char base[256];

/* Saves a freshly initialised tiny model (seeded) as base/VERSION/model.safetensors; the module. */
static nb_module *save_version(int version, uint64_t seed) {
    char dir[300], path[340];
    snprintf(dir, sizeof dir, "%s/%d", base, version);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    nb_manual_seed(seed);
    nb_module *m = nb_nn_from_config(CONFIG, (nb_shape){ 1, { 6 } });
    assert_non_null(m);
    nb_metadata *md = nb_metadata_new();
    assert_int_equal(nb_metadata_set(md, "nabla.config", CONFIG), 0);
    assert_int_equal(nb_metadata_set(md, "nabla.classes", "[\"a\", \"b\", \"c\"]"), 0);
    assert_int_equal(nb_save_state_dict_meta(m, path, md), 0);
    nb_metadata_free(md);
    nb_module_train(m, false);
    return m;
}

/* One HTTP request on a new connection; the status, the body in out (malloc'ed). */
static int http(int port, const char *method, const char *path, const char *body, char **out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char head[512];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n",
                     method, path, body ? strlen(body) : 0);
    assert_int_equal(write(fd, head, (size_t)n), n);
    if (body) assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (ssize_t k; (k = read(fd, buf + len, cap - len - 1)) > 0;) len += (size_t)k;
    buf[len] = 0;
    close(fd);
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &status), 1);
    char *b = strstr(buf, "\r\n\r\n");
    assert_non_null(b);
    *out = strdup(b + 4);
    free(buf);
    return status;
}

static void test_embed_predict(void **state) {
    (void)state;
    snprintf(base, sizeof base, "/tmp/nabla_serve_embed_XXXXXX");
    assert_non_null(mkdtemp(base));
    nb_module *old = save_version(1, 1), *newest = save_version(3, 2);
    nb_serve_opts o = { .model_name = "tiny", .model_base_path = base, .port = 0, .threads = 2 };
    nb_server *s = nb_serve_start(&o);
    assert_non_null(s);
    int port = nb_serve_port(s);
    assert_true(port > 0 && port < 65536);
    char *what = nb_serve_describe(s);
    assert_non_null(strstr(what, "tiny version 3:"));
    assert_null(strstr(what, "version 1:")); /* latest 1: only the newest is loaded */
    free(what);

    const float x[2][6] = { { 0.5f, -1.25f, 2.0f, 0.1f, -0.3f, 7.0f }, { 1e-3f, 3.3f, -2.2f, 0.0f, 4.4f, -5.5f } };
    char *body = NULL;
    int st = http(port, "POST", "/v1/models/tiny:predict",
                  "{\"instances\": [[0.5, -1.25, 2.0, 0.1, -0.3, 7.0], [0.001, 3.3, -2.2, 0, 4.4, -5.5]]}", &body);
    assert_int_equal(st, 200);
    json_t *root = json_loads(body, 0, NULL);
    json_t *pred = json_object_get(root, "predictions");
    assert_int_equal(json_array_size(pred), 2);
    nb_scope *sc = nb_scope_begin();
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *y = nb_forward(newest, nb_from_data(x, (nb_shape){ 2, { 2, 6 } }, NB_F32));
    nb_tensor *y_old = nb_forward(old, nb_from_data(x, (nb_shape){ 2, { 2, 6 } }, NB_F32));
    nb_set_grad_enabled(prev);
    float want[6], other[6];
    assert_int_equal(nb_copy_to(y, want, sizeof want), 0);
    assert_int_equal(nb_copy_to(y_old, other, sizeof other), 0);
    bool differs = false;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            json_t *v = json_array_get(json_array_get(pred, (size_t)i), (size_t)j);
            assert_true(json_is_number(v));
            float got = (float)json_number_value(v);
            assert_memory_equal(&got, &want[i * 3 + j], sizeof got); /* the same bits as the forward pass */
            differs = differs || memcmp(&got, &other[i * 3 + j], sizeof got);
        }
    assert_true(differs); /* version 3, not version 1, answered */
    nb_scope_end(sc);
    json_decref(root);
    free(body);

    assert_int_equal(http(port, "GET", "/v1/models/tiny/versions/1", NULL, &body), 404);
    free(body);
    assert_int_equal(http(port, "GET", "/v2/models/tiny/versions/3/ready", NULL, &body), 200);
    free(body);
    assert_int_equal(nb_serve_stop(s), 0);
    nb_module_free(old);
    nb_module_free(newest);
}

static void test_start_errors(void **state) {
    (void)state;
    nb_serve_opts none = { 0 };
    nb_error_clear();
    assert_null(nb_serve_start(&none));
    assert_non_null(strstr(nb_error(), "no model"));
    assert_null(nb_serve_start(NULL));
    nb_serve_opts missing = { .model_name = "m", .model_base_path = "/nonexistent/nabla/serve" };
    nb_error_clear();
    assert_null(nb_serve_start(&missing));
    assert_non_null(strstr(nb_error(), "/nonexistent/nabla/serve"));
    nb_serve_opts bad_name = { .model_name = "a:b", .model_base_path = base };
    nb_error_clear();
    assert_null(nb_serve_start(&bad_name));
    assert_non_null(strstr(nb_error(), "a:b"));
    /* a port in use */
    nb_serve_opts o = { .model_name = "tiny", .model_base_path = base };
    nb_server *s = nb_serve_start(&o);
    assert_non_null(s);
    nb_serve_opts again = o;
    again.port = nb_serve_port(s);
    nb_error_clear();
    assert_null(nb_serve_start(&again));
    assert_non_null(strstr(nb_error(), "cannot listen"));
    assert_int_equal(nb_serve_stop(s), 0);
    assert_int_equal(nb_serve_stop(NULL), 0);
    assert_int_equal(nb_serve_port(NULL), -1);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embed_predict),
        cmocka_unit_test(test_start_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
