package rest

import (
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// recoverPanics is huma middleware that recovers a panic of the handler: the panic is logged with
// its stack and the request id and counted (Config.Panics, component "rest"), and the request is
// answered 500 internal. When part of the answer was written already the connection is cut
// instead (http.ErrAbortHandler), as net/http would have done, without its bare log line. Other
// requests and the node go on either way.
func (a *API) recoverPanics(ctx huma.Context, next func(huma.Context)) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as it is
			panic(v)
		}
		c := ctx.Context()
		op := ""
		if o := ctx.Operation(); o != nil {
			op = o.OperationID
		}
		a.cfg.Panics.Recovered(c, a.cfg.Logger, "rest", v, "request_id", RequestID(c), "operation", op)
		if ctx.Status() != 0 {
			panic(http.ErrAbortHandler)
		}
		writeError(ctx, newError(RequestID(c), http.StatusInternalServerError, ReasonInternal, "internal error", nil))
	}()
	next(ctx)
}
