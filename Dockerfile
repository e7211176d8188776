# tr-proxy: the Tool Replay forward proxy, run from the TypeScript sources (Node >= 22.19 strips types).
FROM node:22-bookworm-slim
WORKDIR /opt/tool-replay
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY bin ./bin
COPY trace ./trace
COPY store ./store
COPY engine ./engine
COPY proxy ./proxy
COPY cli ./cli
ENV TOOL_REPLAY_STORE=/data/store
VOLUME ["/data/store"]
EXPOSE 8080
ENTRYPOINT ["node", "bin/tr-proxy.js"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
