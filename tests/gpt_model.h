/* examples/char_gpt.c's model for the tests: token and position embeddings, pre-norm blocks
   (layer norm, causal self-attention, layer norm, GELU MLP), a final layer norm and a linear head,
   with PyTorch's parameter names (nn_ref.py's GPT). */
#ifndef NB_TEST_GPT_MODEL_H
#define NB_TEST_GPT_MODEL_H

#include <nabla.h>

typedef struct {
    nb_module base;
    nb_module *ln1, *attn, *ln2, *mlp;
} gpt_block;

static nb_tensor *gpt_block_forward(nb_module *self, nb_tensor *x) {
    gpt_block *b = (gpt_block *)self;
    x = nb_add(x, nb_forward(b->attn, nb_forward(b->ln1, x)));
    return nb_add(x, nb_forward(b->mlp, nb_forward(b->ln2, x)));
}
static const nb_module_class GPT_BLOCK = { .name = "Block", .forward = gpt_block_forward };

/* One block of the given width and heads, or NULL with the error. */
static inline nb_module *gpt_block_new(int64_t width, int heads) {
    gpt_block *b = (gpt_block *)nb_module_new(&GPT_BLOCK, sizeof(gpt_block));
    if (!b) return NULL;
    b->ln1 = nb_module_child(&b->base, "ln1", nb_nn_layer_norm(width));
    b->attn = nb_module_child(&b->base, "attn", nb_nn_multihead_attention(width, heads, (nb_mha_opts){ .causal = true }));
    b->ln2 = nb_module_child(&b->base, "ln2", nb_nn_layer_norm(width));
    b->mlp = nb_module_child(&b->base, "mlp", nb_nn_sequential(nb_nn_linear(width, 4 * width), nb_nn_gelu(),
                                                               nb_nn_linear(4 * width, width), NULL));
    if (!b->ln1 || !b->attn || !b->ln2 || !b->mlp) {
        nb_module_free(&b->base);
        return NULL;
    }
    return &b->base;
}

typedef struct {
    nb_module base;
    nb_module *tok, *pos, *blocks, *ln_f, *head;
} gpt_model;

static nb_tensor *gpt_model_forward(nb_module *self, nb_tensor *idx) {
    gpt_model *g = (gpt_model *)self;
    nb_tensor *pos = nb_to(nb_arange(0, (double)nb_dim(idx, 1), 1, NB_I64), nb_device_of(idx)); /* on idx's device */
    nb_tensor *x = nb_add(nb_forward(g->tok, idx), nb_forward(g->pos, pos));
    return nb_forward(g->head, nb_forward(g->ln_f, nb_forward(g->blocks, x)));
}
static const nb_module_class GPT_MODEL = { .name = "GPT", .forward = gpt_model_forward };

/* The model: token ids [B, T <= context] to logits [B, T, vocab]; NULL with the error. */
static inline nb_module *gpt_model_new(int64_t vocab, int64_t context, int64_t width, int layers, int heads) {
    gpt_model *g = (gpt_model *)nb_module_new(&GPT_MODEL, sizeof(gpt_model));
    if (!g) return NULL;
    g->tok = nb_module_child(&g->base, "tok", nb_nn_embedding(vocab, width));
    g->pos = nb_module_child(&g->base, "pos", nb_nn_embedding(context, width));
    g->blocks = nb_module_child(&g->base, "blocks", nb_nn_sequential(NULL));
    for (int i = 0; i < layers && g->blocks; i++) nb_nn_sequential_add(g->blocks, gpt_block_new(width, heads));
    g->ln_f = nb_module_child(&g->base, "ln_f", nb_nn_layer_norm(width));
    g->head = nb_module_child(&g->base, "head", nb_nn_linear(width, vocab));
    if (nb_error()) {
        nb_module_free(&g->base);
        return NULL;
    }
    return &g->base;
}

#endif
