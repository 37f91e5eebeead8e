/* The commit the library was built from (pelab_commit, pelab/threads.h): the Makefile defines
 * PELAB_COMMIT for this file alone, so a new commit rebuilds this object and no other. */
#include "pelab/threads.h"

#ifndef PELAB_COMMIT
#define PELAB_COMMIT "unknown" /* built without the Makefile */
#endif

const char *pelab_commit(void) { return PELAB_COMMIT; }
