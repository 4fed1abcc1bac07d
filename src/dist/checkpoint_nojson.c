/* Sharded checkpoints (nabla/dist.h) in a build without jansson (NABLA_WITH_JSON=OFF): their
   index.json and their safetensors pieces need it, so both entry points refuse, saying why. */
#include "../core/core_impl.h"
#include "nabla/dist.h"

int nb_dist_save_sharded(nb_module *ddp, nb_optimizer *opt, const char *dir, const nb_metadata *md) {
    (void)ddp; (void)opt; (void)dir; (void)md;
    NB__NO_JSON("nb_dist_save_sharded", "sharded checkpoints");
    return -1;
}

int nb_dist_load_sharded(nb_module *ddp, nb_optimizer *opt, const char *dir, nb_metadata *md) {
    (void)ddp; (void)opt; (void)dir; (void)md;
    NB__NO_JSON("nb_dist_load_sharded", "sharded checkpoints");
    return -1;
}
