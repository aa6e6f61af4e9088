/* blas_select.h — make OpenBLAS use the CPU's vector kernels where its detection fails. */
#ifndef TRM_BLAS_SELECT_H
#define TRM_BLAS_SELECT_H
/* Call first thing in main(); may re-execute the program once (same argv). */
void trm_blas_select(char **argv);
#endif
