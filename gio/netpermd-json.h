// SPDX-License-Identifier: LGPL-2.1-or-later
/* Typed reads of a JSON object's members: NULL, FALSE or 0 when absent or of another type. */
#pragma once

#include <json-glib/json-glib.h>

const char *netpermd_json_string (JsonObject *o, const char *name);
JsonObject *netpermd_json_object (JsonObject *o, const char *name);
JsonArray *netpermd_json_array (JsonObject *o, const char *name);
gboolean netpermd_json_bool (JsonObject *o, const char *name);
/* Whether the member is a boolean at all (`*value` then has it). */
gboolean netpermd_json_has_bool (JsonObject *o, const char *name, gboolean *value);
gint64 netpermd_json_int (JsonObject *o, const char *name);
