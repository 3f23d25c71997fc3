package registry_test

import (
	"context"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()
