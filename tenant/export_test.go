package tenant

// WithBeforeWrite runs f after ApplyState read the live keys and before it
// writes any.
func WithBeforeWrite(o ApplyOptions, f func()) ApplyOptions {
	o.beforeWrite = f
	return o
}
