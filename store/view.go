package store

// A view is a store made over another (WithPrefix, the idle bound). As
// restic's backends do, a view says what it is made over, so an optional
// interface of the store underneath (Sweeper, Stager, Local) is found
// through any number of views without knowing their types.
type view interface {
	// Unwrap returns the store the view is made over.
	Unwrap() Store
}

// keyPrefixer is a view whose keys are stored under a prefix in the store
// it is made over.
type keyPrefixer interface {
	KeyPrefix() string
}

// as finds a T in st or in the stores its views are made over, with the
// prefix the views put in front of a key on the way down ("" when none
// does).
func as[T any](st Store) (found T, prefix string, ok bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, prefix, true
		}
		v, ok := st.(view)
		if !ok {
			break
		}
		if kp, ok := st.(keyPrefixer); ok {
			if prefix == "" {
				prefix = kp.KeyPrefix()
			} else {
				prefix = JoinKey(kp.KeyPrefix(), prefix)
			}
		}
		st = v.Unwrap()
	}
	return found, "", false
}
