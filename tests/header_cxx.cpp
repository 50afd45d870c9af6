// Compiles the public header as C++ and calls through it, so a C++ caller
// can use libtolk as it is (the C side is every other test).
#include <cstring>

#include "tolk.h"

int main() {
  const char *v = tolk_version();
  return (TOLK_VERSION_NUMBER > 0 && std::strlen(v) > 0 &&
          std::strcmp(tolk_status_str(TOLK_OK), "ok") == 0) ? 0 : 1;
}
