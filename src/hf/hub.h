/* The Hugging Face cache lookup of src/hf/hub.c, for the loaders' entry points. Not installed. */
#ifndef NB_HF_HUB_H
#define NB_HF_HUB_H

#include <stddef.h>

/* The longest model folder the loaders take, with room for the file names they join to it. */
#define NB__HF_DIR_MAX 2048

/* name itself when it is a file or folder (or a path), else the folder of its snapshot in the
   Hugging Face cache, into buf; 0, or -1 with an error (fn's) naming where it looked. */
int nb__hf_resolve(const char *fn, const char *name, char *buf, size_t size);

#endif
