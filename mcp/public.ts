/**
 * `tool-replay/mcp`, the public entry: `wrapMcpTransport()` puts a session between an MCP SDK client and its
 * transport (record, strict replay with no server started, faults). The wrapper command is `tr-proxy mcp`. The
 * folder's door for sibling folders is `./index.ts`; what is exported here is a decision, pinned by
 * e2e/public-surface.test.ts.
 */

export type { JsonRpcMessage, McpTransport, WrappedMcpTransport, WrapTransportOptions } from './index.ts'
export { MCP_REFUSAL_CODE, MCP_TIMEOUT_CODE, wrapMcpTransport } from './index.ts'
