// stderr lines of the CUDA stand-in (compiled into each of its libraries).

#include <cstdarg>
#include <cstdio>

#include "common.h"

namespace standin {

void log(const char* fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cuda-standin: %s\n", buf);
}

}  // namespace standin
