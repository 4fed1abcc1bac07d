/* A tiny U-Net for image segmentation on a synthetic task made here: grey images hold a few
   filled circles and rectangles, a little brighter than the background, under noise and an
   uneven lighting (a brightness ramp across the image), so a single threshold on the pixel
   value cannot find them; the mask to predict is 1 inside a shape. The U-Net's encoder sees
   ever wider neighbourhoods (convolutions, group norm, max pooling), its decoder brings the
   resolution back (a transposed convolution, then bilinear upsampling) and concatenates the
   encoder's maps of the same size (the skip connections) so the mask keeps sharp edges. Trained
   per pixel with BCE on logits and Adam; it prints the loss, pixel accuracy and IoU, and one
   held-out image, its mask and the prediction as text.
   Usage: unet [--steps N (400)] [--batch B (16)] [--size S (32), a multiple of 4]
               [--width C (8), a multiple of 4] [--lr LR (3e-3)] [--seed N (0)] */
#include <nabla.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the data */
/* A small generator of its own (xorshift), so the images do not depend on nabla's stream. */
static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0; /* [0, 1) */
}
static double gaussian(void) { /* Box-Muller */
    double u = 1.0 - uniform(), v = uniform();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* n images [n, 1, S, S] and their masks (0 or 1, the same shape), as floats. */
static void make_images(int n, int size, float *image, float *mask) {
    for (int b = 0; b < n; b++) {
        float *img = image + (size_t)b * size * size, *msk = mask + (size_t)b * size * size;
        memset(msk, 0, sizeof(float) * (size_t)size * size);
        int shapes = 1 + (int)(uniform() * 3);
        for (int k = 0; k < shapes; k++) {
            double cy = uniform() * size, cx = uniform() * size, r = size * (0.08 + 0.12 * uniform());
            bool circle = uniform() < 0.5;
            for (int y = 0; y < size; y++)
                for (int x = 0; x < size; x++) {
                    double dy = y + 0.5 - cy, dx = x + 0.5 - cx;
                    bool inside = circle ? dy * dy + dx * dx <= r * r : fabs(dy) <= r && fabs(dx) <= 1.4 * r;
                    if (inside) msk[y * size + x] = 1;
                }
        }
        /* lighting: a ramp in a random direction, as strong as the shapes' own contrast */
        double angle = 6.283185307179586 * uniform(), ramp = 0.8 * uniform();
        for (int y = 0; y < size; y++)
            for (int x = 0; x < size; x++) {
                double t = ((x - size / 2.0) * cos(angle) + (y - size / 2.0) * sin(angle)) / size;
                img[y * size + x] = (float)(0.6 * msk[y * size + x] + ramp * t + 0.3 * gaussian());
            }
    }
}

/* A batch as tensors: images x [n, 1, S, S] and masks y [n, 1, S, S]. */
static nb_tensor *make_batch(int n, int size, nb_tensor **y) {
    size_t count = (size_t)n * size * size;
    float *image = malloc(sizeof(float) * count), *mask = malloc(sizeof(float) * count);
    nb_tensor *x = NULL;
    *y = NULL;
    if (image && mask) {
        make_images(n, size, image, mask);
        x = nb_from_data(image, NB_SHAPE(n, 1, size, size), NB_F32); /* copies */
        *y = nb_from_data(mask, NB_SHAPE(n, 1, size, size), NB_F32);
    }
    free(image);
    free(mask);
    return x;
}

/* ---------------------------------------------------------------- the model */
/* (conv 3x3 -> group norm -> relu) twice: the U-Net's building block, keeping the size. */
static nb_module *conv_block(int64_t in, int64_t out) {
    nb_conv2d_opts same = { .padding = 1 };
    return nb_nn_sequential(nb_nn_conv2d(in, out, 3, same), nb_nn_group_norm(4, out), nb_nn_relu(),
                            nb_nn_conv2d(out, out, 3, same), nb_nn_group_norm(4, out), nb_nn_relu(), NULL);
}

typedef struct {
    nb_module base;
    nb_module *enc1, *enc2, *mid, *pool; /* the encoder: full, half and quarter size */
    nb_module *up2, *dec2;               /* quarter -> half: transposed conv, then a block */
    nb_module *up1, *dec1;               /* half -> full: bilinear upsampling + 1x1 conv, a block */
    nb_module *head;                     /* 1x1 conv to one logit per pixel */
} UNet;

/* The skip connection: the decoder's map and the encoder's of the same size, channels stacked. */
static nb_tensor *skip(nb_tensor *up, nb_tensor *enc) { return nb_cat((nb_tensor *[]){ up, enc }, 2, 1); }

/* x [B, 1, S, S] -> logits [B, 1, S, S] */
static nb_tensor *unet_forward(nb_module *self, nb_tensor *x) {
    UNet *u = (UNet *)self;
    nb_tensor *e1 = nb_forward(u->enc1, x);                    /* [B, C, S, S] */
    nb_tensor *e2 = nb_forward(u->enc2, nb_forward(u->pool, e1)); /* [B, 2C, S/2, S/2] */
    nb_tensor *m = nb_forward(u->mid, nb_forward(u->pool, e2));   /* [B, 4C, S/4, S/4] */
    nb_tensor *d2 = nb_forward(u->dec2, skip(nb_forward(u->up2, m), e2));  /* [B, 2C, S/2, S/2] */
    nb_tensor *d1 = nb_forward(u->dec1, skip(nb_forward(u->up1, d2), e1)); /* [B, C, S, S] */
    return nb_forward(u->head, d1); /* a NULL anywhere above comes out here, its error recorded */
}
static const nb_module_class UNET = { .name = "UNet", .forward = unet_forward };

static nb_module *unet_new(int64_t c) {
    UNet *u = (UNet *)nb_module_new(&UNET, sizeof(UNet));
    if (!u) return NULL;
    nb_module *m = &u->base;
    u->enc1 = nb_module_child(m, "enc1", conv_block(1, c));
    u->enc2 = nb_module_child(m, "enc2", conv_block(c, 2 * c));
    u->mid = nb_module_child(m, "mid", conv_block(2 * c, 4 * c));
    u->pool = nb_module_child(m, "pool", nb_nn_max_pool2d(2, (nb_pool_opts){ 0 }));
    u->up2 = nb_module_child(m, "up2", nb_nn_conv_transpose2d(4 * c, 2 * c, 2, (nb_conv_transpose2d_opts){ .stride = 2 }));
    u->dec2 = nb_module_child(m, "dec2", conv_block(4 * c, 2 * c));
    u->up1 = nb_module_child(m, "up1", nb_nn_sequential(
        nb_nn_upsample((nb_interp_opts){ .scale_factor = { 2 }, .mode = NB_INTERP_BILINEAR }),
        nb_nn_conv2d(2 * c, c, 1, (nb_conv2d_opts){ 0 }), NULL));
    u->dec1 = nb_module_child(m, "dec1", conv_block(2 * c, c));
    u->head = nb_module_child(m, "head", nb_nn_conv2d(c, 1, 1, (nb_conv2d_opts){ 0 }));
    if (!u->enc1 || !u->enc2 || !u->mid || !u->pool || !u->up2 || !u->dec2 || !u->up1 || !u->dec1 || !u->head) {
        nb_module_free(m);
        return NULL;
    }
    return m;
}

/* ---------------------------------------------------------------- the metrics */
typedef struct {
    double accuracy, iou;
} scores;

/* Pixel accuracy and IoU (intersection over union of the predicted and true foreground) of
   logits against masks y; a pixel is predicted foreground where its logit is positive. */
static scores score(nb_tensor *logits, nb_tensor *y) {
    nb_tensor *pred = nb_cast(nb_gt(logits, nb_scalar(0)), NB_F32);
    double inter = nb_item(nb_sum_all(nb_mul(pred, y)));
    double uni = nb_item(nb_sum_all(nb_maximum(pred, y)));
    double acc = nb_item(nb_mean_all(nb_cast(nb_eq(pred, y), NB_F32)));
    return (scores){ acc, uni > 0 ? inter / uni : 1.0 };
}

/* One image, its mask and the prediction side by side as text (' ' to '@' by brightness). */
static void show(nb_tensor *x, nb_tensor *y, nb_tensor *logits, int size) {
    static const char shades[] = " .:-=+*#%@";
    float *img = malloc(sizeof(float) * (size_t)size * size), *msk = malloc(sizeof(float) * (size_t)size * size),
          *lg = malloc(sizeof(float) * (size_t)size * size);
    size_t bytes = sizeof(float) * (size_t)size * size;
    if (img && msk && lg && nb_copy_to(nb_slice(x, 0, 0, 1, 1), img, bytes) == 0 &&
        nb_copy_to(nb_slice(y, 0, 0, 1, 1), msk, bytes) == 0 && nb_copy_to(nb_slice(logits, 0, 0, 1, 1), lg, bytes) == 0) {
        float lo = img[0], hi = img[0];
        for (int i = 0; i < size * size; i++) lo = img[i] < lo ? img[i] : lo, hi = img[i] > hi ? img[i] : hi;
        printf("%-*s  %-*s  %s\n", size, "image", size, "true mask", "predicted");
        for (int r = 0; r < size; r++) {
            for (int c = 0; c < size; c++) putchar(shades[(int)(9.99 * (img[r * size + c] - lo) / (hi - lo + 1e-9))]);
            printf("  ");
            for (int c = 0; c < size; c++) putchar(msk[r * size + c] > 0.5f ? '#' : '.');
            printf("  ");
            for (int c = 0; c < size; c++) putchar(lg[r * size + c] > 0 ? '#' : '.');
            putchar('\n');
        }
    }
    free(img);
    free(msk);
    free(lg);
}

int main(int argc, char **argv) {
    int steps = 400, batch = 16, size = 32, width = 8, seed = 0;
    double lr = 3e-3;
    for (int i = 1; i < argc; i++) {
        int *opt = !strcmp(argv[i], "--steps") ? &steps : !strcmp(argv[i], "--batch") ? &batch
                 : !strcmp(argv[i], "--size") ? &size : !strcmp(argv[i], "--width") ? &width
                 : !strcmp(argv[i], "--seed") ? &seed : NULL;
        if (opt && i + 1 < argc) *opt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
        else steps = -1;
    }
    /* two poolings halve the size twice; group norm splits the channels into 4 groups */
    if (steps <= 0 || batch <= 0 || size < 4 || size % 4 || width < 4 || width % 4 || !(lr > 0) || seed < 0) {
        fprintf(stderr, "usage: %s [--steps N] [--batch B] [--size S (multiple of 4)] [--width C (multiple of 4)] "
                        "[--lr LR] [--seed N]\n", argv[0]);
        return 2;
    }
    nb_manual_seed((uint64_t)seed); /* the weights */
    rng += (uint64_t)seed * 0x9E3779B97F4A7C15ull; /* the images */
    nb_module *model = unet_new(width);
    nb_optimizer *opt = model ? nb_optim_adam(model, (nb_adam_opts){ .lr = lr }) : NULL;
    if (!opt) {
        fprintf(stderr, "error: %s\n", nb_error() ? nb_error() : "out of memory");
        nb_module_free(model);
        return 1;
    }
    printf("U-Net, %lld parameters, %dx%d images, batch %d\n", (long long)nb_module_num_params(model), size, size, batch);
    double first_loss = 0, last_loss = 0;
    for (int step = 1; step <= steps && !nb_error(); step++) {
        nb_scope *s = nb_scope_begin();
        nb_tensor *y, *x = make_batch(batch, size, &y); /* fresh images every step */
        nb_tensor *logits = nb_forward(model, x);
        nb_tensor *loss = nb_bce_with_logits(logits, y, NB_REDUCTION_MEAN, NULL);
        nb_optim_zero_grad(opt);
        if (nb_backward(loss) == 0 && nb_optim_step(opt) == 0) {
            last_loss = nb_item(loss);
            if (step == 1) first_loss = last_loss;
            if (step == 1 || step % 50 == 0 || step == steps) {
                scores sc = score(logits, y);
                printf("step %4d  loss %.4f  pixel accuracy %.3f  IoU %.3f\n", step, last_loss, sc.accuracy, sc.iou);
            }
        }
        nb_scope_end(s);
    }
    int rc = 0;
    if (!nb_error()) { /* 64 images it has not seen, in evaluation mode */
        bool prev = nb_set_grad_enabled(false);
        nb_module_train(model, false);
        nb_scope *s = nb_scope_begin();
        nb_tensor *y, *x = make_batch(64, size, &y);
        nb_tensor *logits = nb_forward(model, x);
        double loss = nb_item(nb_bce_with_logits(logits, y, NB_REDUCTION_MEAN, NULL));
        scores sc = score(logits, y);
        /* what predicting "all shape" scores: the IoU to beat */
        double baseline = nb_item(nb_mean_all(y));
        if (!nb_error()) {
            show(x, y, logits, size);
            printf("test loss %.4f  pixel accuracy %.3f  IoU %.3f (all-foreground baseline IoU %.3f)\n", loss,
                   sc.accuracy, sc.iou, baseline);
            printf("final loss %.4f (first %.4f)\n", last_loss, first_loss);
        }
        nb_scope_end(s);
        nb_set_grad_enabled(prev);
    }
    if (nb_error()) {
        fprintf(stderr, "error: %s\n", nb_error());
        rc = 1;
    }
    nb_optim_free(opt);
    nb_module_free(model);
    return rc;
}
