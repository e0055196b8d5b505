/* registry.h: every op's dispatch table (kernels/dispatch.h), for tests and diagnostics. A module
 * of its own above the kernels: it names every kernel file's table, while those files reach only
 * the dispatcher, so no kernel module depends back on the list of all of them. */
#ifndef BERT8_REGISTRY_H
#define BERT8_REGISTRY_H

#include "kernels/dispatch.h"

/* The name of the implementation an op runs, by op name ("layernorm", "attention", ...), or
 * NULL when no such op has been dispatched yet. */
const char *b8_dispatch_choice(const char *op);

/* Every op's table, in a fixed order. */
int b8_dispatch_op_count(void);
b8_op_table *b8_dispatch_op(int i);

#endif
