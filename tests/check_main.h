/* check_main.h — the one runner every Check suite ends with: run all, exit non-zero on any
 * failure. */
#ifndef TRM_CHECK_MAIN_H
#define TRM_CHECK_MAIN_H
#include <check.h>

static inline int trm_run_suite(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
