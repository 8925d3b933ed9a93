package rest

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// DocsPath is where the human-readable API page is served; its stylesheet is DocsPath+"/docs.css".
const DocsPath = "/docs"

//go:embed docs/page.html docs/docs.css
var docsFiles embed.FS

var docsTemplate = template.Must(template.ParseFS(docsFiles, "docs/page.html"))

// docsPage returns the handler of GET /docs and GET /docs/docs.css: an HTML page rendered on the
// server from the API's own OpenAPI document (every operation with its parameters, body, answer
// and error reasons), with a stylesheet from the binary. It loads nothing from elsewhere: no
// script, no CDN. The page is rendered at its first request, once every operation is registered.
func (a *API) docsPage() http.Handler {
	var (
		once sync.Once
		page []byte
		err  error
	)
	css, _ := docsFiles.ReadFile("docs/docs.css")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		switch r.URL.Path {
		case DocsPath + "/docs.css":
			h.Set("Content-Type", "text/css; charset=utf-8")
			_, _ = w.Write(css)
		case DocsPath, DocsPath + "/":
			once.Do(func() {
				var b bytes.Buffer
				err = docsTemplate.Execute(&b, a.docsView())
				page = b.Bytes()
			})
			if err != nil {
				a.cfg.Logger.Error("render the API page", "err", err)
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(page)
		default:
			http.NotFound(w, r)
		}
	})
}

type docsView struct {
	Title, Version, Description string
	Tags                        []docsTag
	Reasons                     []ReasonDoc
}

type docsTag struct {
	Name string
	Ops  []docsOp
}

type docsOp struct {
	ID, Method, Path, Summary, Description, Auth string
	Params, Body, Data                           []docsField
	Answers                                      []docsAnswer
}

type docsField struct{ Name, In, Type, Description string }

type docsAnswer struct {
	Status      string
	Error       bool
	Description string
}

// docsView builds the page's model from the OpenAPI document.
func (a *API) docsView() docsView {
	doc := a.huma.OpenAPI()
	v := docsView{Title: doc.Info.Title, Version: doc.Info.Version, Description: doc.Info.Description, Reasons: Reasons()}
	tags := map[string]*docsTag{}
	for path, item := range doc.Paths {
		for _, o := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if o == nil {
				continue
			}
			tag := "other"
			if len(o.Tags) > 0 {
				tag = o.Tags[0]
			}
			if tags[tag] == nil {
				tags[tag] = &docsTag{Name: tag}
			}
			tags[tag].Ops = append(tags[tag].Ops, a.docsOperation(path, o))
		}
	}
	for _, t := range tags {
		sort.Slice(t.Ops, func(i, j int) bool {
			if t.Ops[i].Path != t.Ops[j].Path {
				return t.Ops[i].Path < t.Ops[j].Path
			}
			return t.Ops[i].Method < t.Ops[j].Method
		})
		v.Tags = append(v.Tags, *t)
	}
	sort.Slice(v.Tags, func(i, j int) bool { return v.Tags[i].Name < v.Tags[j].Name })
	return v
}

func (a *API) docsOperation(path string, o *huma.Operation) docsOp {
	reg := a.huma.OpenAPI().Components.Schemas
	d := docsOp{ID: o.OperationID, Method: o.Method, Path: path, Summary: o.Summary, Description: o.Description,
		Auth: "none (public)"}
	if len(o.Security) > 0 {
		var names []string
		for name := range o.Security[0] {
			names = append(names, name)
		}
		sort.Strings(names)
		d.Auth = strings.Join(names, " + ")
	}
	for _, p := range o.Parameters {
		typ := ""
		if p.Schema != nil {
			typ = p.Schema.Type
		}
		if p.Required {
			typ += ", required"
		}
		d.Params = append(d.Params, docsField{Name: p.Name, In: p.In, Type: typ, Description: p.Description})
	}
	if o.RequestBody != nil {
		if mt := o.RequestBody.Content["application/json"]; mt != nil {
			d.Body = schemaFields(reg, mt.Schema)
		}
	}
	for code, r := range o.Responses {
		ans := docsAnswer{Status: code, Error: code >= "400", Description: r.Description}
		d.Answers = append(d.Answers, ans)
		if code == "200" || code == "201" {
			if mt := r.Content["application/json"]; mt != nil && d.Data == nil {
				if env := resolve(reg, mt.Schema); env != nil {
					d.Data = schemaFields(reg, env.Properties["data"])
				}
			}
		}
	}
	sort.Slice(d.Answers, func(i, j int) bool { return d.Answers[i].Status < d.Answers[j].Status })
	return d
}

// resolve follows a $ref of s in reg.
func resolve(reg huma.Registry, s *huma.Schema) *huma.Schema {
	for i := 0; s != nil && s.Ref != "" && i < 8; i++ {
		s = reg.SchemaFromRef(s.Ref)
	}
	return s
}

// schemaFields lists the properties of an object schema; an array lists its items' properties.
func schemaFields(reg huma.Registry, s *huma.Schema) []docsField {
	s = resolve(reg, s)
	if s == nil {
		return nil
	}
	if s.Type == "array" {
		return schemaFields(reg, s.Items)
	}
	var out []docsField
	for name, p := range s.Properties {
		typ := "any JSON"
		if r := resolve(reg, p); r != nil && r.Type != "" {
			typ = r.Type
			if r.Type == "array" && r.Items != nil {
				if it := resolve(reg, r.Items); it != nil && it.Type != "" {
					typ = "array of " + it.Type
				}
			}
		}
		for _, req := range s.Required {
			if req == name {
				typ += ", required"
			}
		}
		out = append(out, docsField{Name: name, Type: typ, Description: p.Description})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
