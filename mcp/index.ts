/** MCP over stdio: the `tr-proxy mcp` wrapper and the in-process Transport wrapper, one conversation adapter. */

export type { ClientEnd, ConversationOptions, ServerEnd } from './conversation.ts'
/** The conversation both MCP paths feed; the JSON-RPC error codes of its refusals and timeouts. */
export { MCP_REFUSAL_CODE, MCP_TIMEOUT_CODE, McpConversation } from './conversation.ts'
export type { SessionPort } from './lifecycle.ts'
/** A session in this process as the MCP paths use it. */
export { localPort, remotePort } from './lifecycle.ts'
export type { McpStdioExit, McpStdioOptions } from './stdio-wrapper.ts'
/** Serves one stdio conversation (`tr-proxy mcp -- cmd`); server names. */
export { assertServerName, runMcpStdio, sanitizeServerName, serverNameFor } from './stdio-wrapper.ts'
export type { JsonRpcMessage, McpTransport, WrappedMcpTransport, WrapTransportOptions } from './transport.ts'
/** The in-process path: an SDK client Transport recorded and replayed through a session. */
export { wrapMcpTransport } from './transport.ts'
