package chartschema

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// docLink matches a Go doc link: [Name], [pkg.Name], [Type.Name] or
// [pkg.Type.Name], not followed by "(" (a Markdown link).
var docLink = regexp.MustCompile(`\[\*?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,2})\]([^(]|$)`)

// resolveLinks replaces each doc link of text (a doc comment of src's
// package) that names a constant by the constant's value, written as an
// operator writes it in the config file: "Zero means
// [DefaultFetchTimeout]" becomes "Zero means `5s`". A link to anything
// else (a type, a function, a field) is an error: the reader of the
// configuration reference cannot follow it, so the comment must say what
// it means in words. A bracketed lower-case word that names no constant
// ("list[i]") is not a link and stays.
func (d *docs) resolveLinks(src *source, text string) (string, error) {
	var errs []error
	var b strings.Builder
	last := 0
	for _, m := range docLink.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		v, err := d.constant(src, name)
		switch {
		case err == nil:
			b.WriteString(text[last:m[0]])
			b.WriteString("`" + v + "`")
			last = m[3] + 1 // past the "]"
		case errors.Is(err, errNotConst) && !exported(name):
			// not a doc link: leave it as written
		case errors.Is(err, errNotConst):
			errs = append(errs, fmt.Errorf("[%s] names no constant, whose value the configuration reference could show: an operator cannot follow a link to Go code, so say in words what it means", name))
		default:
			errs = append(errs, fmt.Errorf("[%s]: %w", name, err))
		}
	}
	b.WriteString(text[last:])
	return b.String(), errors.Join(errs...)
}

// exported reports whether name, as a doc link, would name an exported
// identifier: its last part starts with a capital.
func exported(name string) bool {
	last := name[strings.LastIndex(name, ".")+1:]
	return last != "" && last[0] >= 'A' && last[0] <= 'Z'
}

var errNotConst = errors.New("not a constant")

// constant returns the value of the constant a doc link of src's package
// names ("Name" or "pkg.Name", pkg one of its imports in the module),
// formatted for the config file.
func (d *docs) constant(src *source, link string) (string, error) {
	pkgName, name, qualified := strings.Cut(link, ".")
	if !qualified {
		name = pkgName
	} else {
		p, ok := src.imports[pkgName]
		if !ok || !strings.HasPrefix(p, d.module) || strings.Contains(name, ".") {
			return "", errNotConst
		}
		var err error
		if src, err = d.pkg(p); err != nil {
			return "", err
		}
	}
	if _, ok := src.consts[name]; !ok {
		return "", errNotConst
	}
	v, err := d.value(src, name, 0)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// String writes v as the config file takes it: a duration as "10s",
// "5m" or "1h30m", anything else as Go writes it, strings unquoted.
func (v constValue) String() string {
	switch {
	case v.duration:
		ns, ok := constant.Int64Val(v.v)
		if !ok {
			return v.v.ExactString()
		}
		s := time.Duration(ns).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	case v.v.Kind() == constant.String:
		return constant.StringVal(v.v)
	case v.v.Kind() == constant.Float:
		f, _ := constant.Float64Val(v.v)
		return strconv.FormatFloat(f, 'g', -1, 64)
	default:
		return v.v.ExactString()
	}
}

// timeUnits are the constants of package time a constant may be built
// from.
var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

// value evaluates the constant name of src. It knows literals, the
// operators, other constants of the module and the units of package time:
// what the defaults of config types are made of. Anything else is an
// error, never a wrong value.
func (d *docs) value(src *source, name string, depth int) (constValue, error) {
	if v, ok := src.values[name]; ok {
		return v, nil
	}
	c := src.consts[name]
	if c.expr == nil {
		return constValue{}, fmt.Errorf("constant %s.%s has no value of its own (iota?), which is not read", src.path, name)
	}
	if depth > 20 {
		return constValue{}, fmt.Errorf("constant %s.%s: too deep", src.path, name)
	}
	v, err := d.eval(src, c.expr, depth+1)
	if err != nil {
		return constValue{}, fmt.Errorf("constant %s.%s: %w", src.path, name, err)
	}
	if c.typ != nil {
		v.duration = d.isDuration(src, c.typ)
	}
	src.values[name] = v
	return v, nil
}

// isDuration reports whether the type expression t of src is time.Duration.
func (d *docs) isDuration(src *source, t ast.Expr) bool {
	sel, ok := t.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && src.imports[x.Name] == "time" && sel.Sel.Name == "Duration"
}

// eval evaluates the constant expression e of src, as value describes.
func (d *docs) eval(src *source, e ast.Expr, depth int) (constValue, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if v.Kind() == constant.Unknown {
			return constValue{}, fmt.Errorf("literal %s does not parse", e.Value)
		}
		return constValue{v: v}, nil
	case *ast.ParenExpr:
		return d.eval(src, e.X, depth)
	case *ast.UnaryExpr:
		x, err := d.eval(src, e.X, depth)
		if err != nil {
			return constValue{}, err
		}
		return constValue{v: constant.UnaryOp(e.Op, x.v, 0), duration: x.duration}, nil
	case *ast.BinaryExpr:
		x, err := d.eval(src, e.X, depth)
		if err != nil {
			return constValue{}, err
		}
		y, err := d.eval(src, e.Y, depth)
		if err != nil {
			return constValue{}, err
		}
		return binary(e.Op, x, y)
	case *ast.Ident:
		switch {
		case e.Name == "true" || e.Name == "false":
			return constValue{v: constant.MakeBool(e.Name == "true")}, nil
		case e.Name == "iota":
			return constValue{}, errors.New("iota is not read")
		}
		if _, ok := src.consts[e.Name]; !ok {
			return constValue{}, fmt.Errorf("%s is not a constant of %s", e.Name, src.path)
		}
		return d.value(src, e.Name, depth)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			break
		}
		p := src.imports[x.Name]
		if unit, ok := timeUnits[e.Sel.Name]; ok && p == "time" {
			return constValue{v: constant.MakeInt64(int64(unit)), duration: true}, nil
		}
		if strings.HasPrefix(p, d.module) {
			other, err := d.pkg(p)
			if err != nil {
				return constValue{}, err
			}
			if _, ok := other.consts[e.Sel.Name]; ok {
				return d.value(other, e.Sel.Name, depth)
			}
		}
	case *ast.CallExpr:
		if len(e.Args) == 1 && d.isDuration(src, e.Fun) {
			v, err := d.eval(src, e.Args[0], depth)
			v.duration = true
			return v, err
		}
	}
	return constValue{}, fmt.Errorf("the expression at %T is not read", e)
}

// binary applies the operator op to x and y as Go does to constants.
func binary(op token.Token, x, y constValue) (constValue, error) {
	if x.v.Kind() == constant.Unknown || y.v.Kind() == constant.Unknown {
		return constValue{}, errors.New("an operand is unknown")
	}
	duration := x.duration || y.duration
	switch op {
	case token.SHL, token.SHR:
		s, ok := constant.Uint64Val(y.v)
		if !ok {
			return constValue{}, errors.New("a shift count is not a small whole number")
		}
		return constValue{v: constant.Shift(x.v, op, uint(s)), duration: x.duration}, nil
	case token.EQL, token.NEQ, token.LSS, token.LEQ, token.GTR, token.GEQ:
		return constValue{v: constant.MakeBool(constant.Compare(x.v, op, y.v))}, nil
	case token.QUO:
		if x.duration && y.duration {
			duration = false // a ratio of durations is a number
		}
		if x.v.Kind() == constant.Int && y.v.Kind() == constant.Int {
			if constant.Sign(y.v) == 0 {
				return constValue{}, errors.New("division by zero")
			}
			op = token.QUO_ASSIGN // integer division, as for typed integers
		}
	}
	return constValue{v: constant.BinaryOp(x.v, op, y.v), duration: duration}, nil
}
