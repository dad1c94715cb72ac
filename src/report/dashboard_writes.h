// The dashboard's writes: a note or a decision on a study, recorded as `dltune note` and `dltune decide` record them
// (RecordNote, RecordDecision). GuardedServer admits a write only with the token, from the page's own origin, with a
// JSON body; these routes check what the body says.
#pragma once

#include <httplib.h>

#include <functional>
#include <string>

namespace dltune {

// POST /api/studies/NAME/notes {"text", "resolves"?} and POST /api/studies/NAME/decisions {"adopt", "because"}:
// 201 with {"study", "summary" (the line the CLI prints), "note": {"id", "kind", "adopt", "text", "author",
// "resolves", "created_at"}}; 400 with {"error"} for a body that is not such an object or input RecordNote /
// RecordDecision refuse, 404 for an unknown study. Each write opens the store at `store_url` for writing, records
// `author` as who wrote it, and then calls `written` with the study's name (to drop its cached pages).
void RouteWrites(httplib::Server& server, const std::string& store_url, const std::string& author,
                 const std::function<void(const std::string&)>& written);

}  // namespace dltune
