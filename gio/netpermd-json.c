// SPDX-License-Identifier: LGPL-2.1-or-later
/* Typed member reads over json-glib. */
#include "netpermd-json.h"

static JsonNode *
value_member (JsonObject *o, const char *name, GType type)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == type ? n : NULL;
}

const char *
netpermd_json_string (JsonObject *o, const char *name)
{
  JsonNode *n = value_member (o, name, G_TYPE_STRING);
  return n ? json_node_get_string (n) : NULL;
}

JsonObject *
netpermd_json_object (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_OBJECT (n) ? json_node_get_object (n) : NULL;
}

JsonArray *
netpermd_json_array (JsonObject *o, const char *name)
{
  JsonNode *n = o ? json_object_get_member (o, name) : NULL;
  return n && JSON_NODE_HOLDS_ARRAY (n) ? json_node_get_array (n) : NULL;
}

gboolean
netpermd_json_has_bool (JsonObject *o, const char *name, gboolean *value)
{
  JsonNode *n = value_member (o, name, G_TYPE_BOOLEAN);
  if (n)
    *value = json_node_get_boolean (n);
  return n != NULL;
}

gboolean
netpermd_json_bool (JsonObject *o, const char *name)
{
  gboolean v = FALSE;
  return netpermd_json_has_bool (o, name, &v) && v;
}

gint64
netpermd_json_int (JsonObject *o, const char *name)
{
  JsonNode *n = value_member (o, name, G_TYPE_INT64);
  return n ? json_node_get_int (n) : 0;
}
