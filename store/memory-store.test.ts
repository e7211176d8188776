import { createMemoryStore } from './memory-store.ts'
import { runTraceStoreContract } from './trace-store-contract.ts'

runTraceStoreContract('memory', async () => ({ store: createMemoryStore() }))
