package rehearsal

// LowerPriority is lowerPriority, for the tests of package rehearsal_test.
var LowerPriority = lowerPriority
