/* The CLI's built-in model configs (nb_nn_config_builtin): mlp, cnn and resnet, as JSON text. */
#include "nn_impl.h"
#include <string.h>

/* ---------- built-in configs ---------- */
static const char MLP_CONFIG[] =
    "{\"name\": \"mlp\", \"input\": [1, 28, 28], \"layers\": [\n"
    "  {\"type\": \"flatten\"},\n"
    "  {\"type\": \"linear\", \"out\": 128},\n"
    "  {\"type\": \"relu\"},\n"
    "  {\"type\": \"linear\", \"out\": 10}\n"
    "]}\n";

/* The TensorFlow tutorial's convnet, as tools/nabla.c built it before configs. */
static const char CNN_CONFIG[] =
    "{\"name\": \"cnn\", \"input\": [1, 28, 28], \"layers\": [\n"
    "  {\"type\": \"conv2d\", \"out\": 32, \"kernel\": 5, \"padding\": 2},\n"
    "  {\"type\": \"relu\"},\n"
    "  {\"type\": \"max_pool2d\", \"kernel\": 2},\n"
    "  {\"type\": \"conv2d\", \"out\": 64, \"kernel\": 5, \"padding\": 2},\n"
    "  {\"type\": \"relu\"},\n"
    "  {\"type\": \"max_pool2d\", \"kernel\": 2},\n"
    "  {\"type\": \"flatten\"},\n"
    "  {\"type\": \"linear\", \"out\": 1024},\n"
    "  {\"type\": \"relu\"},\n"
    "  {\"type\": \"dropout\", \"p\": 0.4},\n"
    "  {\"type\": \"linear\", \"out\": 10}\n"
    "]}\n";

/* A small residual CNN for 1x28x28 images (308k parameters): a 3x3 stem of 32 with batch norm
   and a 2x2 max pool (28 -> 14), three BasicBlock-style residual blocks 32 -> 64 (stride 2, 7x7)
   -> 128 (stride 2, 4x4) with 1x1 projection shortcuts, global average pooling and a linear
   classifier. Sized for 2 CPU cores: a training step at batch 64 takes 46-55 ms on 2 cores of an
   AVX-512 Xeon (the same widths at 28x28 without the pool cost 2.3-3.4 times), so 12 epochs of
   54k samples take 8-10 minutes (README: the recipe). */
static const char RESNET_CONFIG[] =
    "{\"name\": \"resnet\", \"input\": [1, 28, 28], \"layers\": [\n"
    "  {\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"padding\": 1, \"bias\": false},\n"
    "  {\"type\": \"batch_norm\"},\n"
    "  {\"type\": \"relu\"},\n"
    "  {\"type\": \"max_pool2d\", \"kernel\": 2},\n"
    "  {\"type\": \"residual\", \"layers\": [\n"
    "    {\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"},\n"
    "    {\"type\": \"relu\"},\n"
    "    {\"type\": \"conv2d\", \"out\": 32, \"kernel\": 3, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"}]},\n"
    "  {\"type\": \"residual\", \"layers\": [\n"
    "    {\"type\": \"conv2d\", \"out\": 64, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"},\n"
    "    {\"type\": \"relu\"},\n"
    "    {\"type\": \"conv2d\", \"out\": 64, \"kernel\": 3, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"}]},\n"
    "  {\"type\": \"residual\", \"layers\": [\n"
    "    {\"type\": \"conv2d\", \"out\": 128, \"kernel\": 3, \"stride\": 2, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"},\n"
    "    {\"type\": \"relu\"},\n"
    "    {\"type\": \"conv2d\", \"out\": 128, \"kernel\": 3, \"padding\": 1, \"bias\": false},\n"
    "    {\"type\": \"batch_norm\"}]},\n"
    "  {\"type\": \"global_avg_pool\"},\n"
    "  {\"type\": \"linear\", \"out\": 10}\n"
    "]}\n";

const char *nb_nn_config_builtin(const char *name) {
    if (name && !strcmp(name, "mlp")) return MLP_CONFIG;
    if (name && !strcmp(name, "cnn")) return CNN_CONFIG;
    if (name && !strcmp(name, "resnet")) return RESNET_CONFIG;
    nb__error("nb_nn_config_builtin: unknown model \"%.60s\" (built in: mlp, cnn, resnet)", name ? name : "(null)");
    return NULL;
}
