/* Sharded checkpoints across world sizes, driven by tests/dist_resume_test.sh: examples/mlp.c's
   MLP trained with AdamW on fixed global batches of 60 (split evenly across the ranks), under a
   sharding mode, from scratch or from a sharded checkpoint, then saved as a sharded checkpoint
   and as an ordinary state dict; and a comparison of two state dicts.
   Usage: dist_resume MODE STEPS OUT_DIR [FROM_DIR]   (MODE: none, optimizer, full)
          dist_resume compare A.safetensors B.safetensors TOLERANCE
   The first step is numbered by the checkpoint's "step" metadata, so a resumed run sees the
   batches an uninterrupted one would. Exit 0 on success. */
#include <nabla.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { nb_module base; nb_module *fc1, *fc2; } Net;
static nb_tensor *net_forward(nb_module *self, nb_tensor *x) {
    Net *n = (Net *)self;
    return nb_forward(n->fc2, nb_relu(nb_forward(n->fc1, x)));
}
static const nb_module_class NET = { .name = "Net", .forward = net_forward };

static int die(const char *what) {
    fprintf(stderr, "dist_resume (rank %d): %s: %s\n", nb_dist_rank(), what, nb_error() ? nb_error() : "failed");
    nb_dist_finalize();
    return 1;
}

static int compare(const char *a, const char *b, double tol) {
    nb_safetensors *fa = nb_safetensors_open(a), *fb = nb_safetensors_open(b);
    if (!fa || !fb) { fprintf(stderr, "compare: %s\n", nb_error()); return 1; }
    double worst = 0;
    for (int i = 0; i < nb_safetensors_count(fa); i++) {
        const char *name = nb_safetensors_name(fa, i);
        nb_scope *s = nb_scope_begin();
        nb_tensor *x = nb_safetensors_get(fa, name), *y = nb_safetensors_get(fb, name);
        if (!x || !y) { fprintf(stderr, "compare: %s\n", nb_error()); return 1; }
        double big = nb_item(nb_max(nb_flatten(nb_abs(x), 0, -1), 0, false));
        double diff = nb_item(nb_max(nb_flatten(nb_abs(nb_sub(x, y)), 0, -1), 0, false));
        worst = fmax(worst, diff / fmax(big, 1e-30));
        nb_scope_end(s);
    }
    printf("largest relative difference %.3g (at most %g)\n", worst, tol);
    nb_safetensors_close(fa);
    nb_safetensors_close(fb);
    return worst <= tol ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "compare")) return compare(argv[2], argv[3], atof(argv[4]));
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: dist_resume MODE STEPS OUT_DIR [FROM_DIR] | dist_resume compare A B TOL\n");
        return 2;
    }
    if (nb_dist_init(&argc, &argv) < 0) return die("nb_dist_init");
    int R = nb_dist_rank(), W = nb_dist_world_size();
    nb_shard mode = !strcmp(argv[1], "full") ? NB_SHARD_FULL : !strcmp(argv[1], "optimizer") ? NB_SHARD_OPTIMIZER : NB_SHARD_NONE;
    int steps = atoi(argv[2]);
    const char *out = argv[3], *from = argc == 5 ? argv[4] : NULL;
    if (60 % W) { fprintf(stderr, "dist_resume: 60 does not split across %d ranks\n", W); return 2; }
    nb_manual_seed(1);
    Net *net = (Net *)nb_module_new(&NET, sizeof(Net));
    net->fc1 = nb_module_child(&net->base, "fc1", nb_nn_linear(784, 64));
    net->fc2 = nb_module_child(&net->base, "fc2", nb_nn_linear(64, 10));
    nb_module *m = W > 1 || mode != NB_SHARD_NONE ? nb_ddp(&net->base, (nb_ddp_opts){ .shard = mode }) : &net->base;
    if (!m) return die("nb_ddp");
    nb_optimizer *opt = nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-3 });
    int64_t first = 0;
    if (from) {
        nb_metadata *md = nb_metadata_new();
        if (nb_dist_load_sharded(m, opt, from, md) < 0 || nb_metadata_get_int(md, "step", &first) < 0) return die("loading");
        nb_metadata_free(md);
    }
    /* the global batch of step k: 60 fixed rows, this rank's contiguous part of them */
    nb_manual_seed(7);
    nb_scope *data = nb_scope_begin();
    nb_tensor *x = nb_keep(nb_randn(NB_SHAPE(600, 784), NB_F32));
    nb_tensor *y = nb_keep(nb_argmax(nb_matmul(x, nb_randn(NB_SHAPE(784, 10), NB_F32)), 1, false));
    nb_scope_end(data);
    int64_t per = 60 / W;
    for (int64_t k = first; k < first + steps; k++) {
        nb_scope *s = nb_scope_begin();
        int64_t at = (k % 10) * 60 + R * per;
        nb_tensor *loss = nb_cross_entropy(nb_forward(m, nb_slice(x, 0, at, at + per, 1)), nb_slice(y, 0, at, at + per, 1), (nb_ce_opts){ 0 });
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) < 0 || nb_optim_step(opt) < 0) return die("training");
        nb_scope_end(s);
    }
    nb_metadata *md = nb_metadata_new();
    nb_metadata_set_int(md, "step", first + steps);
    char path[512];
    snprintf(path, sizeof path, "%s.safetensors", out);
    if (nb_dist_save_sharded(m, opt, out, md) < 0 || nb_dist_save_state_dict(m, path) < 0) return die("saving");
    nb_metadata_free(md);
    nb_release(x);
    nb_release(y);
    nb_optim_free(opt);
    nb_module_free(m);
    nb_dist_finalize();
    return 0;
}
