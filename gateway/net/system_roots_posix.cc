#include "gateway/net/system_roots.h"

namespace h2gate::net {

int loadSystemRoots(SSL_CTX* ctx) {
  return SSL_CTX_set_default_verify_paths(ctx);
}

}  // namespace h2gate::net
