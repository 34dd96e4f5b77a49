// Asio and Asio.SSL compiled once for the whole program
// (BOOST_ASIO_SEPARATE_COMPILATION), instead of in every file that uses them:
// it roughly halves build time on a 2-core machine.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
