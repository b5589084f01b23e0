#include <stdio.h>

#include "cli/commands.h"
#include "nibble.h"

int cmd_version(int argc, char **argv) {
    (void)argc;
    (void)argv;
    const nb_cpu_features *f = nb_cpu();
    printf("nibble 0.1.0\n");
    printf("cpu: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512vnni=%d\n", f->avx2, f->fma,
           f->f16c, f->avx512f, f->avx512bw, f->avx512vl, f->avx512vnni);
    printf("kernels: %s (%s)\n", nb_isa_name(nb_isa_active()), nb_isa_note());
    return 0;
}
