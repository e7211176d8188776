/** MCP over stdio: the `tr-proxy mcp` wrapper and the in-process Transport wrapper, one adapter over capture/. */

export type { ClientEnd } from './client-target.ts'
/** The JSON-RPC error codes of Tool Replay's refusals and of a fault's timeout. */
export { MCP_REFUSAL_CODE, MCP_TIMEOUT_CODE } from './client-target.ts'
export type { ConversationOptions, ServerEnd } from './conversation.ts'
/** The conversation both MCP paths feed. */
export { McpConversation } from './conversation.ts'
export type { McpResendOptions, McpResendResult } from './drift-resend.ts'
/** `tr-proxy drift` of MCP stdio messages: the server re-spawned, the messages re-sent through the capture path. */
export { MCP_RESEND_TIMEOUT_MS, resendMcpStdio } from './drift-resend.ts'
export type { McpStdioExit, McpStdioOptions } from './stdio-wrapper.ts'
/** Serves one stdio conversation (`tr-proxy mcp -- cmd`); server names. */
export { assertServerName, runMcpStdio, sanitizeServerName, serverNameFor } from './stdio-wrapper.ts'
export type { JsonRpcMessage, McpTransport, WrappedMcpTransport, WrapTransportOptions } from './transport.ts'
/** The in-process path: an SDK client Transport recorded and replayed through a session. */
export { wrapMcpTransport } from './transport.ts'
