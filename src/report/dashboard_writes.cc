#include "report/dashboard_writes.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dltune/core/error.h"
#include "dltune/store/store.h"
#include "report/decision_log.h"
#include "store/tracking.h"

namespace dltune {
namespace {

using nlohmann::json;

// The HTTP status of an Error the store or the checks threw.
int StatusFor(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kInvalidInput: return 400;
    case ErrorKind::kUnavailable: return 503;
    case ErrorKind::kConflict: return 409;
    default: return 500;
  }
}

void Answer(httplib::Response& response, int status, const json& body) {
  response.status = status;
  response.set_header("Cache-Control", "no-store");
  response.set_content(body.dump(), "application/json; charset=utf-8");
}

// The request's body as an object of string fields, every one of them among `known` and those of `required`
// present; throws Error (invalid input) naming what is wrong.
std::map<std::string, std::string> Fields(const std::string& body, const std::set<std::string>& known,
                                          const std::set<std::string>& required) {
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) throw Error("the body must be a JSON object");
  std::map<std::string, std::string> fields;
  for (const auto& [name, value] : parsed.items()) {
    if (known.count(name) == 0) {
      throw Error(fmt::format("the body has an unknown field \"{}\" (known: {})", name, fmt::join(known, ", ")));
    }
    if (!value.is_string()) throw Error(fmt::format("the body's field \"{}\" must be a string", name));
    fields[name] = value.get<std::string>();
  }
  for (const std::string& name : required) {
    if (fields.count(name) == 0) throw Error(fmt::format("the body needs the field \"{}\"", name));
  }
  return fields;
}

json NoteJson(const RecordedNote& recorded) {
  const StudyNote& note = recorded.note;
  return {{"study", recorded.study.name},
          {"summary", recorded.summary},
          {"note",
           {{"id", note.id},
            {"kind", NoteKindName(note.kind)},
            {"adopt", note.adopt},
            {"text", note.text},
            {"author", note.author},
            {"resolves", note.resolves},
            {"created_at", note.created_at}}}};
}

}  // namespace

void RouteWrites(httplib::Server& server, const std::string& store_url, const std::string& author,
                 const std::function<void(const std::string&)>& written) {
  // One write at a time: each opens the store for writing, records, and closes it.
  auto writing = std::make_shared<std::mutex>();
  using Record = std::function<RecordedNote(Store&, const std::string&, std::map<std::string, std::string>&)>;
  const auto route = [&server, store_url, writing, written](
                         const std::string& pattern, const std::set<std::string>& known,
                         const std::set<std::string>& required, const Record& record) {
    server.Post(pattern, [=](const httplib::Request& request, httplib::Response& response) {
      const std::string study = request.matches[1].str();
      try {
        std::map<std::string, std::string> fields = Fields(request.body, known, required);
        const std::lock_guard<std::mutex> lock(*writing);
        const std::unique_ptr<Store> store = OpenStore(store_url, /*create_if_missing=*/false);
        try {
          (void)RequireStudy(*store, study);
        } catch (const Error& e) {
          return Answer(response, 404, {{"error", e.what()}});
        }
        const RecordedNote recorded = record(*store, study, fields);
        written(recorded.study.name);
        Answer(response, 201, NoteJson(recorded));
      } catch (const Error& e) {
        Answer(response, StatusFor(e), {{"error", e.what()}});
      }
    });
  };
  route(R"(/api/studies/([^/]+)/notes)", {"text", "resolves"}, {"text"},
        [author](Store& store, const std::string& study, std::map<std::string, std::string>& fields) {
          return RecordNote(store,
                            {.study = study, .text = fields["text"], .resolves = fields["resolves"], .author = author});
        });
  route(R"(/api/studies/([^/]+)/decisions)", {"adopt", "because"}, {"adopt", "because"},
        [author](Store& store, const std::string& study, std::map<std::string, std::string>& fields) {
          return RecordDecision(
              store, {.study = study, .adopt = fields["adopt"], .because = fields["because"], .author = author});
        });
}

}  // namespace dltune
