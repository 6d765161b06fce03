package postgres

// SetSendLanes sets how many groups s's sender writes at once, so that a
// test can hold them all up with one lock.
func SetSendLanes(s *Store, n int) {
	s.sends.mu.Lock()
	s.sends.maxLanes = n
	s.sends.mu.Unlock()
}
