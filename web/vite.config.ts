import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

// The build lands in the Go package that embeds it; `proctor dev` serves it at /.
export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "../internal/webapp/dist",
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    proxy: { "/v2": "http://127.0.0.1:8080", "/auth": "http://127.0.0.1:8080" },
  },
});
