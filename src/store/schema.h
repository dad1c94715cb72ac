// Internal: the store's schema, as migrations from version 0 (an empty database) up to kStoreSchemaVersion.
// docs/store-schema.md describes every table; keep the two in step.
#pragma once

#include "sql_connection.h"

namespace dltune::internal {

// Brings the database to `target` (at most kStoreSchemaVersion) in one transaction, safe against other processes
// doing the same at the same time. Throws Error if the database is newer than this dltune knows.
// Returns the version the database now has.
int Migrate(SqlConnection& connection, int target);

// The version recorded in the database; 0 for an empty database.
int ReadSchemaVersion(SqlConnection& connection);

}  // namespace dltune::internal
