/* libnabla loaded with dlopen, a parallel op run (the pool's workers start), then dlclose:
   the workers must be gone before the code they run is unmapped (a spinning worker would crash
   the process a moment later). Usage: dlclose_test PATH_TO_LIBNABLA_SO */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

typedef struct nb_tensor nb_tensor;

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    for (int round = 0; round < 3; round++) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        void (*set_threads)(int) = (void (*)(int))dlsym(lib, "nb_set_num_threads");
        nb_tensor *(*arange)(double, double, double, int) = (nb_tensor * (*)(double, double, double, int)) dlsym(lib, "nb_arange");
        double (*item)(nb_tensor *) = (double (*)(nb_tensor *))dlsym(lib, "nb_item");
        nb_tensor *(*sum_all)(nb_tensor *) = (nb_tensor * (*)(nb_tensor *)) dlsym(lib, "nb_sum_all");
        nb_tensor *(*exp_)(nb_tensor *) = (nb_tensor * (*)(nb_tensor *)) dlsym(lib, "nb_exp");
        void (*release)(nb_tensor *) = (void (*)(nb_tensor *))dlsym(lib, "nb_release");
        if (!set_threads || !arange || !item || !sum_all || !exp_ || !release) {
            fprintf(stderr, "dlsym failed\n");
            return 1;
        }
        set_threads(2);
        /* a million elements: the exp runs on the pool; NB_F32 is dtype 0 */
        nb_tensor *x = arange(0, 1, 1e-6, 0), *e = exp_(x), *t = sum_all(e);
        double s = item(t);
        release(t);
        release(e);
        release(x);
        if (!(s > 0)) {
            fprintf(stderr, "the sum came back as %g\n", s);
            return 1;
        }
        if (dlclose(lib) != 0) {
            fprintf(stderr, "dlclose: %s\n", dlerror());
            return 1;
        }
        usleep(200000); /* long enough for a worker left behind to run into unmapped code */
    }
    printf("dlclose_test: library unloaded cleanly 3 times\n");
    return 0;
}
