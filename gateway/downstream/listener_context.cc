#include "gateway/downstream/listener_context.h"

namespace h2gate::downstream {

std::optional<Refusal> ListenerContext::checkAddress(const RequestHead& head,
                                                     const StreamInfo& info,
                                                     const net::IpAddress& ip) const {
  for (const filters::FilterPtr& f : filters)
    if (std::optional<Refusal> refusal = f->checkAddress(head, info, ip)) return refusal;
  return std::nullopt;
}

}  // namespace h2gate::downstream
