// Raven RPC 2.3.0, from raven/rpc/contract.py; do not edit.
export const CODES = Object.freeze({
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  SESSION_NOT_FOUND: -32002,
  REQUEST_NOT_FOUND: -32003,
  CURSOR_EXPIRED: -32004,
});
export const DECISIONS = Object.freeze({
  allow_once: "Allow once",
  allow_always: "Always allow",
  reject_once: "Reject",
  reject_always: "Always reject",
});
