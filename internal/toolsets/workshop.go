package toolsets

import "github.com/portcullis-mcp/portcullis/internal/catalog"

// workshopTools is the toolset of the workshop stdio server:
// weather, country_info and calculator. The calculator is the core one;
// enabling both toolsets registers it once.
func workshopTools(opts WeatherOptions, deps Deps) []catalog.Tool {
	return noSession(weatherTool(newWeatherClient(opts, deps)), countryTool(), calculatorTool())
}
