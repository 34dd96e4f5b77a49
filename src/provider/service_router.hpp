#pragma once
// Which code serves which stream: the provider's table of services. The
// contract itself (ServiceContext, ServiceRouter) is session/service.hpp;
// the provider checks the grant allows the name, answers the stream header,
// and hands the stream over.

#include "session/service.hpp"

namespace runsnack {

// Every service a provider serves: info and its bandwidth probe, forward, run, cp, shell and cuda.
ServiceRouter default_services();

}  // namespace runsnack
