/* pelab/real.h — the numeric type of every activation, parameter and gradient.
 *
 * float in the library users run; double when built with -DPELAB_DOUBLE, which is how the
 * gradient checks and the PyTorch-twin test build the same sources.
 */
#ifndef PELAB_REAL_H
#define PELAB_REAL_H

#include <math.h>

/* Math in the real type's own precision: float code must not pay for double libm calls. */
#ifdef PELAB_DOUBLE
typedef double pelab_real;
#define PELAB_REAL_NAME "F64"
#define pelab_exp exp
#define pelab_sqrt sqrt
#else
typedef float pelab_real;
#define PELAB_REAL_NAME "F32"
#define pelab_exp expf
#define pelab_sqrt sqrtf
#endif

/* x for a message: a NaN without its sign bit, so that every build prints "nan", never "-nan". */
static inline double pelab_printable(double x) { return isnan(x) ? (double)NAN : x; }

#endif
