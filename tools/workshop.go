package tools

// workshopTools is the toolset of the workshop stdio server:
// weather, country_info and calculator. The calculator is the core one;
// enabling both toolsets registers it once.
func workshopTools(opts WeatherOptions, deps Deps) []tool {
	return []tool{weatherTool(newWeatherClient(opts, deps)), countryTool(), calculatorTool()}
}
