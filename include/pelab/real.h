/* pelab/real.h — the numeric type of every activation, parameter and gradient.
 *
 * float in the library users run; double when built with -DPELAB_DOUBLE, which is how the
 * gradient checks and the PyTorch-twin test build the same sources.
 */
#ifndef PELAB_REAL_H
#define PELAB_REAL_H

#ifdef PELAB_DOUBLE
typedef double pelab_real;
#define PELAB_REAL_NAME "F64"
#else
typedef float pelab_real;
#define PELAB_REAL_NAME "F32"
#endif

#endif
