// `smolvm-check http-call`: makes one case's calls to an http profile's sandbox
// (launch/http_profile.h), inside the case's safety net, as the command of a command profile
// would run there. The plan comes on stdin:
//
//   {"endpoint": "unix:/tmp/w/api.sock", "result": "smolbox_json",
//    "calls": [{"method": "POST", "path": "/v1/run", "body": {...}, "result": true, "always": false}]}
//
// The calls are made in order; a transport error or a status other than 2xx stops those that
// follow, except the ones marked "always" (a teardown). Then, for a "smolbox_json" result, the
// result call's reply is printed as it came; for "exit_code", its "result_fields" (JSON pointers)
// give the stdout and stderr printed and the exit code. A failure prints what failed on stderr and
// exits 125. A killed http-call hangs up, which cancels a run in the server.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

namespace CLI {
class App;
}
namespace httplib {
class Client;
}

namespace smolvm_check {

// A client of endpoint (unix:PATH or http://HOST:PORT), with a 10 s connection timeout.
std::unique_ptr<httplib::Client> EndpointClient(const std::string& endpoint);

// The body of the command; tests drive it directly. Returns the exit code.
int RunHttpCall(const std::string& plan_text, std::ostream& out, std::ostream& err);

// Registers the subcommand (not in the help: it is the runner's); its callback stores the exit
// code in exit_code.
void AddHttpCallCommand(CLI::App& app, int& exit_code);

}  // namespace smolvm_check
