/* version.c: `nibble version`: the version, the CPU's features and the kernel set it gets. */
#include <stdio.h>

#include "cli/args.h"
#include "cli/commands.h"

int cmd_version(int argc, char **argv) {
    arg_spec spec = {"version", "usage: nibble version\n  the version, the CPU's features and the kernel set it gets\n",
                     NULL, 0, NULL, 0, 0};
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    const nb_cpu_features *f = nb_cpu();
    printf("nibble %s\n", NB_VERSION);
    printf("cpu: avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512vnni=%d\n", f->avx2, f->fma,
           f->f16c, f->avx512f, f->avx512bw, f->avx512vl, f->avx512vnni);
    printf("kernels: %s (%s)\n", nb_isa_name(nb_isa_active()), nb_isa_note());
    return 0;
}
