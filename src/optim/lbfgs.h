/* LBFGS's settings, history and step (lbfgs.c), for the optimizer (optim.c). Internal. */
#ifndef NB_LBFGS_H
#define NB_LBFGS_H

#include "nabla/optim.h"

typedef struct nb__lbfgs nb__lbfgs;

/* Checks the options and takes torch's defaults for the zero fields; NULL with an error
   naming nb_optim_lbfgs. */
nb__lbfgs *nb__lbfgs_new(const nb_lbfgs_opts *opts);
/* One step of torch.optim.LBFGS.step(closure) over params (n of them, one dtype and device)
   with learning rate lr; 0, or <0 with an error. */
int nb__lbfgs_step(nb__lbfgs *l, nb_tensor *const *params, int n, double lr);
/* Frees the history (NULL is ignored). */
void nb__lbfgs_free(nb__lbfgs *l);

#endif
